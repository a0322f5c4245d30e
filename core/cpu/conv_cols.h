// Column matrices of the CPU convolution (internal to core/cpu/conv.cpp). Two layouts:
//
// Exact columns (vol2col / col2vol), any stride and padding: col is (K, m*L), one row
// per kernel tap (c, i, j, k), columns ordered (sample, Do, Ho, Wo), zeros where a tap
// reads padding. Each row is assembled from runs of Wo elements, so small maps pay
// per-run overhead.
//
// Padded planes (stride 1 only): each input channel is copied into a zero-padded plane
// of dp x hp x wp. Output position q = (od*hp + oh)*wp + ow then reads plane element
// q + tap_offset(i, j, k) for tap (i, j, k), so for a fixed tap the inputs of all output
// positions and channels form a strided matrix (C, Q) with row stride `plane`, which a
// GEMM reads in place: the convolution is a sum of kd*kh*kw GEMMs, with no column matrix.
// Rows share their padding columns (the right pad of a row is the left pad of the next,
// wp = W + max(left, right pad)), so each row carries only kw - 1 - min(left, right)
// "wrap" columns (ow >= Wo) whose results are garbage: the forward output drops them,
// and the backward pass zeroes the output gradient there, which makes their weight-
// gradient terms and input-gradient contributions exactly zero.
// Legend as in ConvGeometry (core/kernels.h): m samples in the chunk, K = C*kd*kh*kw,
// L = Do*Ho*Wo, Q = ((Do - 1)*hp + Ho)*wp >= L columns per sample.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/kernels.h"

namespace zt::cpu {

/// Output positions [lo, hi) along one axis whose input index o*s + tap - pad lies in
/// [0, in), for a tap at offset `tap` from the window's origin.
struct Span {
  int64_t lo, hi;
};
inline Span valid_span(int64_t tap, int64_t s, int64_t pad, int64_t in, int64_t out) {
  int64_t lo = pad - tap <= 0 ? 0 : (pad - tap + s - 1) / s;
  int64_t last = in - 1 + pad - tap;  // largest o*s allowed
  int64_t hi = last < 0 ? 0 : std::min(out, last / s + 1);
  return {std::min(lo, hi), hi};
}

/// col (K, m*L) <- x (m, C, D, H, W); zeros where a tap reads padding.
template <typename T>
void vol2col(const ConvGeometry& g, const T* x, int64_t m, T* col);

/// dx (m, C, D, H, W) <- sum over taps of col (K, m*L). Overwrites dx.
template <typename T>
void col2vol(const ConvGeometry& g, const T* col, int64_t m, T* dx);

/// The padded-plane layout of a stride-1 convolution.
struct PlaneLayout {
  int64_t dp = 1, hp = 1, wp = 1;  // padded sizes
  int64_t plane = 1;               // elements per padded channel: dp * hp * wp
  int64_t q = 1;                   // GEMM columns (output positions with wrap) per sample
  int64_t slack = 0;               // zeros after the last plane that windows may read
  /// Elements of the padded input of one sample (C planes and the slack).
  int64_t buffer_size(const ConvGeometry& g) const { return g.c * plane + slack; }
  /// Offset of tap (i, j, k) from a window's origin.
  int64_t tap_offset(int64_t i, int64_t j, int64_t k) const { return (i * hp + j) * wp + k; }
};

/// Calls fn(t, offset) for every tap t of g's kernel (in weight order) with its offset
/// from a window's origin in layout p.
template <typename Fn>
void for_each_tap(const ConvGeometry& g, const PlaneLayout& p, Fn&& fn) {
  int64_t t = 0;
  for (int64_t i = 0; i < g.kd; ++i)
    for (int64_t j = 0; j < g.kh; ++j)
      for (int64_t k = 0; k < g.kw; ++k) fn(t++, p.tap_offset(i, j, k));
}

/// True when the padded-plane layout applies (stride 1, not pointwise) and its wrap
/// columns add at most half of the real ones.
bool use_planes(const ConvGeometry& g);
/// The layout of g (call only when use_planes(g)).
PlaneLayout plane_layout(const ConvGeometry& g);

/// xp (C, plane) + slack <- one sample x (C, D, H, W), zero padding. Overwrites all of xp.
template <typename T>
void pad_planes(const ConvGeometry& g, const PlaneLayout& p, const T* x, T* xp);

/// dx (C, D, H, W) <- the interior of the padded planes dxp (C, plane), one sample.
template <typename T>
void crop_planes(const ConvGeometry& g, const PlaneLayout& p, const T* dxp, T* dx);

/// out (O, L) <- y (O, Q) without the wrap columns, plus bias (O) if non-null; one sample.
template <typename T>
void planes2out(const ConvGeometry& g, const PlaneLayout& p, const T* y, const T* bias, T* out);

/// gp (O, Q) <- grad_out (O, L), zeros in the wrap columns; one sample.
template <typename T>
void grad2planes(const ConvGeometry& g, const PlaneLayout& p, const T* grad_out, T* gp);

}  // namespace zt::cpu
