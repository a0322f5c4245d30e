// The f32 rows of GroupNorm with its epilogue (core/ops/norm.h), forward and backward,
// one pass over a row each: n = x a + sh, z = n scale + shift, y = silu(z), and back.
// Written once for a vector type of lanes.h (f32x16, f32x8, f32x4) and compiled per ISA
// into F32Loops (cpu/norm.cpp, cpu/norm_sums.h). Private to cpu/norm.cpp.
//
// Numerics: the bits of the separate row passes these replace (scale_shift_row, then the
// modulation loop built for the baseline ISA, then lane_row's silu or silu_grad):
// - n = x a + sh rounds as scale_shift_row built for the same ISA does (GCC contracts it
//   into one FMA on AVX2 and AVX-512);
// - the modulation n scale + shift rounds twice, product then sum, as the baseline
//   (SSE2, no FMA) loop did: an empty asm hides the product from that contraction;
// - silu and silu' are lanes.h's, as the silu op's row kernel for the same ISA.
// The tail of a row is padded into one vector, as lane_row does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/cpu/lanes.h"

namespace zt::cpu {

// a b, hidden by an empty asm from GCC's contraction of a multiply and a following add
// into one FMA: (a b) + c then rounds twice, whatever the ISA.
template <typename V>
__attribute__((always_inline)) inline V mul_no_fma(V a, V b) {
  V p = a * b;
  asm("" : "+v"(p));
  return p;
}

// One vector of m <= w elements from i on: y = silu(z) (kSilu) or z, z = n scale + shift
// (kMod) or n, n = x a + sh. scale and shift are read only with kMod.
template <typename V, bool kMod, bool kSilu>
__attribute__((always_inline)) inline void gn_epilogue_vec(float* y, const float* x, int64_t i,
                                                           int64_t m, float a, float sh,
                                                           const float* scale, const float* shift) {
  V z = load_part<V>(x + i, m) * a + sh;
  if constexpr (kMod) z = mul_no_fma(z, load_part<V>(scale + i, m)) + load_part<V>(shift + i, m);
  if constexpr (kSilu) z = silu_lanes(z);
  store_part(y + i, z, m);
}

// The backward of gn_epilogue_vec for upstream dy: dz = silu'(z) dy (dy without kSilu);
// with kMod, dshift = dz and dscale = dz n where those are not null, and dn = dz scale;
// else dn = dz. dn may alias dy.
template <typename V, bool kMod, bool kSilu>
__attribute__((always_inline)) inline void gn_epilogue_grad_vec(
    float* dn, float* dscale, float* dshift, const float* dy, const float* x, int64_t i, int64_t m,
    float a, float sh, const float* scale, const float* shift) {
  const V nv = load_part<V>(x + i, m) * a + sh;
  V s{}, dz = load_part<V>(dy + i, m);
  if constexpr (kMod) s = load_part<V>(scale + i, m);
  if constexpr (kSilu) {
    V z = nv;
    if constexpr (kMod) z = mul_no_fma(nv, s) + load_part<V>(shift + i, m);
    dz = silu_grad_lanes(dz, z);
  }
  if constexpr (kMod) {
    if (dshift) store_part(dshift + i, dz, m);
    if (dscale) store_part(dscale + i, dz * nv, m);
    dz *= s;
  }
  store_part(dn + i, dz, m);
}

// A row of n elements: whole vectors (a constant size, so the copies are plain loads and
// stores), then the tail padded into one.
template <typename V, bool kMod, bool kSilu>
__attribute__((always_inline)) inline void gn_epilogue_row(float* y, const float* x, int64_t n,
                                                           float a, float sh, const float* scale,
                                                           const float* shift) {
  constexpr int64_t w = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + w <= n; i += w) gn_epilogue_vec<V, kMod, kSilu>(y, x, i, w, a, sh, scale, shift);
  if (i < n) gn_epilogue_vec<V, kMod, kSilu>(y, x, i, n - i, a, sh, scale, shift);
}

template <typename V, bool kMod, bool kSilu>
__attribute__((always_inline)) inline void gn_epilogue_grad_row(float* dn, float* dscale,
                                                                float* dshift, const float* dy,
                                                                const float* x, int64_t n, float a,
                                                                float sh, const float* scale,
                                                                const float* shift) {
  constexpr int64_t w = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + w <= n; i += w)
    gn_epilogue_grad_vec<V, kMod, kSilu>(dn, dscale, dshift, dy, x, i, w, a, sh, scale, shift);
  if (i < n)
    gn_epilogue_grad_vec<V, kMod, kSilu>(dn, dscale, dshift, dy, x, i, n - i, a, sh, scale, shift);
}

// gn_epilogue_row with the epilogue picked at run time: modulated when scale is not null.
template <typename V>
__attribute__((always_inline)) inline void gn_epilogue_lanes(float* y, const float* x, int64_t n,
                                                             float a, float sh, const float* scale,
                                                             const float* shift, bool silu) {
  if (scale) {
    silu ? gn_epilogue_row<V, true, true>(y, x, n, a, sh, scale, shift)
         : gn_epilogue_row<V, true, false>(y, x, n, a, sh, scale, shift);
  } else {
    silu ? gn_epilogue_row<V, false, true>(y, x, n, a, sh, scale, shift)
         : gn_epilogue_row<V, false, false>(y, x, n, a, sh, scale, shift);
  }
}

// gn_epilogue_grad_row with the epilogue picked at run time, as gn_epilogue_lanes.
template <typename V>
__attribute__((always_inline)) inline void gn_epilogue_grad_lanes(
    float* dn, float* dscale, float* dshift, const float* dy, const float* x, int64_t n, float a,
    float sh, const float* scale, const float* shift, bool silu) {
  if (scale) {
    silu ? gn_epilogue_grad_row<V, true, true>(dn, dscale, dshift, dy, x, n, a, sh, scale, shift)
         : gn_epilogue_grad_row<V, true, false>(dn, dscale, dshift, dy, x, n, a, sh, scale, shift);
  } else {
    silu ? gn_epilogue_grad_row<V, false, true>(dn, dscale, dshift, dy, x, n, a, sh, scale, shift)
         : gn_epilogue_grad_row<V, false, false>(dn, dscale, dshift, dy, x, n, a, sh, scale, shift);
  }
}

}  // namespace zt::cpu
