// The tile transforms of the CPU Winograd convolution over a whole chunk of tile rows
// (internal to core/cpu/winograd.cpp; see winograd.h for the transforms). A chunk is the
// tile rows [r0, r0 + rows) of the images of m samples, nt = rows * tw tiles; its points
// are (16, channels, nt): point xi of channel ch, tile t at
// xi * point_stride(channels, nt) + ch * nt + t, tile t = (row - r0) * tw + column.
// f32 runs one copy of the three loops per ISA (AVX-512, AVX2, the SSE2 baseline), picked
// at run time, so a chunk is one call and its rows' vector code inlines into the loop;
// f64 runs scalar code. Every copy computes the same bits (the transforms only add).
#pragma once

#include <cstdint>

#include "core/cpu/lanes.h"

namespace zt::cpu {

/// Elements between two points' (rows, cols) matrices: the input or result points of a
/// chunk (rows channels, cols tiles) or the transformed kernels (O, C). A power of two
/// (32 x 256, 64 x 64) would put the 16 streams a tile row or a kernel reads or writes
/// into the same L1 sets; one cache line of skew spreads them.
inline int64_t point_stride(int64_t rows, int64_t cols) {
  return rows * cols + 16;
}

/// Where the images of a (m, channels, D, H, W) tensor live: image (sample s, slice z)
/// channel ch starts at (s * channels * D + z) * H * W + ch * D * H * W.
struct ImageGrid {
  int64_t d, h, w, th, tw;  ///< depth slices per sample, image size, tiles per column / row
  int64_t plane(int64_t channels, int64_t tile_row, int64_t ch) const {
    const int64_t image = tile_row / th, s = image / d, z = image % d;
    return ((s * channels + ch) * d + z) * h * w;
  }
};

/// The three chunk transforms for element type T, compiled for one ISA.
template <typename T>
struct WinogradTransforms {
  /// v (16, C, nt) <- B^T d B of the input tiles d of a chunk of src (m, C, D, H, W).
  /// pad: scratch of 4 (2 tw + 2) elements, zero-initialized before a convolution's first
  /// chunk.
  void (*inputs)(const ImageGrid& im, int64_t c, const T* src, int64_t r0, int64_t rows, T* v,
                 T* pad);
  /// The chunk's tiles of dst (m, O, D, H, W) <- A^T m A (+ bias (O), may be null) from
  /// mm (16, O, nt). rows2: scratch of 4 tw elements.
  void (*outputs)(const ImageGrid& im, int64_t o, const T* mm, const T* bias, int64_t r0,
                  int64_t rows, T* dst, T* rows2);
  /// v (16, O, nt) <- A g A^T of the chunk's tiles g of grad (m, O, D, H, W). rows2:
  /// scratch of 4 tw elements.
  void (*grads)(const ImageGrid& im, int64_t o, const T* grad, int64_t r0, int64_t rows, T* v,
                T* rows2);
};

/// The f32 transforms compiled for isa (which this CPU must run; the tests compare them).
const WinogradTransforms<float>& winograd_transforms_f32(Isa isa);
/// The f32 transforms one tile at a time (no vector code): the tests' reference.
const WinogradTransforms<float>& winograd_transforms_f32_scalar();

/// The transforms this CPU runs: f32 for cpu_isa(), f64 the scalar ones.
template <typename T>
const WinogradTransforms<T>& winograd_transforms();

}  // namespace zt::cpu
