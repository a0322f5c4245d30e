// Column matrices of the CPU convolution (internal to core/cpu/conv.cpp). Two layouts:
//
// Exact columns (vol2col / col2vol), any stride and padding: col is (K, m*L), one row
// per kernel tap (c, i, j, k), columns ordered (sample, Do, Ho, Wo), zeros where a tap
// reads padding. Each row is assembled from runs of Wo elements, so small maps pay
// per-run overhead.
//
// Padded planes (stride 1 only): each input channel is first copied into a zero-padded
// plane of Dp x Hp x Wp (Dp = Do + kd - 1, ...). In padded coordinates output position
// q = od*Hp*Wp + oh*Wp + ow reads input element q + (i*Hp*Wp + j*Wp + k) for tap
// (i, j, k), so a tap's column row is one contiguous window of the plane: a single copy
// per (tap, sample) instead of one per output row. The price is that the column matrix
// also holds "wrap" columns (ow >= Wo, or oh >= Ho between depth slices) whose results
// are garbage: the forward output drops them, and the backward pass zeroes the output
// gradient there, which makes their weight-gradient terms and their input-gradient
// columns exactly zero. Columns per sample: Q = (Do - 1)*Hp*Wp + Ho*Wp >= L.
// Legend as in conv.h: m samples in the chunk, K = C*kd*kh*kw, L = Do*Ho*Wo.
#pragma once

#include <cstdint>

#include "core/cpu/conv.h"

namespace zt::cpu {

/// col (K, m*L) <- x (m, C, D, H, W); zeros where a tap reads padding.
template <typename T>
void vol2col(const ConvGeometry& g, const T* x, int64_t m, T* col);

/// dx (m, C, D, H, W) <- sum over taps of col (K, m*L). Overwrites dx.
template <typename T>
void col2vol(const ConvGeometry& g, const T* col, int64_t m, T* dx);

/// The padded-plane layout of a stride-1 convolution.
struct PlaneLayout {
  int64_t dp = 1, hp = 1, wp = 1;  // padded input sizes
  int64_t plane = 1;               // elements per padded channel: dp * hp * wp
  int64_t q = 1;                   // columns per sample: (Do - 1)*hp*wp + Ho*wp
  /// Elements of the padded input of m samples, with the slack the last window reads.
  int64_t buffer_size(const ConvGeometry& g, int64_t m) const { return m * g.c * plane + g.kw; }
};

/// True when the padded-plane layout applies (stride 1, not pointwise) and its wrap
/// columns add at most half of the real ones.
bool use_planes(const ConvGeometry& g);
/// The layout of g (call only when use_planes(g)).
PlaneLayout plane_layout(const ConvGeometry& g);

/// xp (m, C, plane) + slack <- x (m, C, D, H, W), zero borders. Overwrites all of xp.
template <typename T>
void pad_planes(const ConvGeometry& g, const PlaneLayout& p, const T* x, int64_t m, T* xp);

/// col (K, m*Q) <- windows of xp.
template <typename T>
void planes2col(const ConvGeometry& g, const PlaneLayout& p, const T* xp, int64_t m, T* col);

/// dx (m, C, D, H, W) <- sum over taps of col (K, m*Q), via the padded planes dxp
/// (scratch of p.buffer_size(g, m) elements). Overwrites dx.
template <typename T>
void col2planes(const ConvGeometry& g, const PlaneLayout& p, const T* col, int64_t m, T* dxp,
                T* dx);

/// out (m, O, L) <- y (O, m*Q) without the wrap columns, plus bias (O) if non-null.
template <typename T>
void planes2out(const ConvGeometry& g, const PlaneLayout& p, const T* y, const T* bias, int64_t m,
                T* out);

/// gp (O, m*Q) <- grad_out (m, O, L), zeros in the wrap columns.
template <typename T>
void grad2planes(const ConvGeometry& g, const PlaneLayout& p, const T* grad_out, int64_t m, T* gp);

}  // namespace zt::cpu
