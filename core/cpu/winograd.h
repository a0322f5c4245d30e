// Winograd F(2x2, 3x3) convolution on CPU (internal to core/cpu/conv.cpp) for "same" 3x3
// convolutions: kernel 3x3, stride 1, padding 1 on every side, output the size of the
// input. These are most of a VQ autoencoder's work. Each 2x2 output tile comes from a
// 4x4 input tile with 16 multiplications per (input, output) channel pair instead of
// 36, so the GEMM work drops 2.25x; the tile transforms are additions.
//   V = B^T d B (input tile d, 4x4)   U = G k G^T (kernel k, 3x3 -> 4x4)
//   M[xi] (O, T) = U[xi] (O, C) @ V[xi] (C, T) for each of the 16 points xi (16 GEMMs)
//   y = A^T m A (2x2 output tile from the 16 GEMM results m of its tile)
// Legend as in ConvGeometry (core/kernels.h); T = tiles of a chunk. A 3-D convolution
// with kd = 1 and no depth padding is a 2-D one on each depth slice, so it qualifies too.
#pragma once

#include <cstdint>

#include "core/kernels.h"

namespace zt::cpu {

/// True when g is a "same" 3x3 convolution (2-D, or 3-D with kd = 1 and no depth
/// padding) with enough channels on both sides for the transforms to pay.
bool winograd_applies(const ConvGeometry& g);

/// Whole samples a chunk of the Winograd passes takes (at least 1; chunks of one sample
/// may cut it). Passes over m samples that begin at a multiple of it in the batch cut the
/// same chunks as a pass over the whole batch, so their results have its bits.
int64_t winograd_samples_per_chunk(const ConvGeometry& g, int64_t elem_size);

/// out (m, O, D, H, W) = conv(x (m, C, D, H, W), w (O, C, 1, 3, 3)) + bias (O; may be
/// null), for the m samples given. Overwrites out. Requires winograd_applies(g).
template <typename T>
void winograd_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, int64_t m,
                      T* out);

/// grad_x (m, C, D, H, W) of winograd_forward from grad_out (m, O, D, H, W): the same
/// convolution of grad_out with the kernel transposed and rotated by 180 degrees.
/// Overwrites grad_x. Requires winograd_applies(g).
template <typename T>
void winograd_backward_data(const ConvGeometry& g, const T* grad_out, const T* w, int64_t m,
                            T* grad_x);

/// grad_w (O, C, 1, 3, 3) of winograd_forward over the m samples given (written, not
/// added): G^T [sum over tiles of (A g A^T) * (B^T d B)] G per channel pair, 16 GEMMs.
/// Requires winograd_applies(g).
template <typename T>
void winograd_backward_weight(const ConvGeometry& g, const T* x, const T* grad_out, int64_t m,
                              T* grad_w);

}  // namespace zt::cpu
