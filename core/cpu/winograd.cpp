// Winograd F(2x2, 3x3) for "same" 3x3 convolutions; see winograd.h for the algorithm.
// The images (sample, depth slice) are cut into rows of tiles, and chunks of tile rows
// (32 to 256 tiles, chunk_tiles_for) go through transform -> 16 GEMMs -> inverse
// transform, so a chunk's transformed tiles stay in cache between the three steps. The
// tile transforms run a chunk per call, in vector loops for this CPU's ISA
// (winograd_chunk.h).
// Numerics: the transform matrices hold 0, +-1 and 1/2, so rounding differs from the
// direct convolution by a few ulps of the largest partial sum (the F(2, 3) transform is
// the best conditioned of the Winograd family).
#include "core/cpu/winograd.h"

#include <algorithm>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu/winograd_chunk.h"

namespace zt::cpu {

namespace {

constexpr int64_t kPoints = 16;       // transform points per tile (4x4)
constexpr int64_t kMinChannels = 16;  // below this the GEMMs are too thin to pay

// U = G k G^T for one output channel's C kernels at once: k (9, C) tap-major, u[xi] the
// C values of point xi. Straight-line arithmetic over ci, so the compiler vectorizes it
// (the per-pair scalar version cost as much as the GEMMs on 4x4 maps with 128 channels).
// Point xi of channel ci goes to u[xi * stride + ci].
template <typename T>
void kernel_points(const T* __restrict k, int64_t c, T* __restrict u, int64_t stride) {
// The 16 rows of u never overlap (stride >= c): GCC may vectorize with no overlap checks. The
// pragma is GCC's; clang's nearest, vectorize(assume_safety), demands vectorization and fails
// the -Werror build where its vectorizer does not run (-O1), so clang decides for itself.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
  for (int64_t ci = 0; ci < c; ++ci) {
    T gk[4][3];  // G k
    for (int j = 0; j < 3; ++j) {
      const T k0 = k[j * c + ci], k1 = k[(3 + j) * c + ci], k2 = k[(6 + j) * c + ci];
      gk[0][j] = k0;
      gk[1][j] = T(0.5) * (k0 + k1 + k2);
      gk[2][j] = T(0.5) * (k0 - k1 + k2);
      gk[3][j] = k2;
    }
    for (int i = 0; i < 4; ++i) {  // (G k) G^T
      const T r0 = gk[i][0], r1 = gk[i][1], r2 = gk[i][2];
      u[(i * 4 + 0) * stride + ci] = r0;
      u[(i * 4 + 1) * stride + ci] = T(0.5) * (r0 + r1 + r2);
      u[(i * 4 + 2) * stride + ci] = T(0.5) * (r0 - r1 + r2);
      u[(i * 4 + 3) * stride + ci] = r2;
    }
  }
}

// The kernel gradient G^T dU G of one output channel's C pairs from the 16 points' C
// values (point xi of channel ci at p[xi * stride + ci]) into kt (9, C) tap-major;
// vectorized over ci like kernel_points.
template <typename T>
void kernel_gradients(const T* __restrict p, int64_t stride, int64_t c, T* __restrict kt) {
// The 9 rows of kt never overlap (GCC's pragma, as above).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
  for (int64_t ci = 0; ci < c; ++ci) {
    T h[4][3];  // dU G
    for (int64_t i = 0; i < 4; ++i) {
      const T p0 = p[(i * 4) * stride + ci], p1 = p[(i * 4 + 1) * stride + ci],
              p2 = p[(i * 4 + 2) * stride + ci], p3 = p[(i * 4 + 3) * stride + ci];
      h[i][0] = p0 + T(0.5) * (p1 + p2);
      h[i][1] = T(0.5) * (p1 - p2);
      h[i][2] = T(0.5) * (p1 + p2) + p3;
    }
    for (int64_t j = 0; j < 3; ++j) {  // G^T (dU G)
      kt[j * c + ci] = h[0][j] + T(0.5) * (h[1][j] + h[2][j]);
      kt[(3 + j) * c + ci] = T(0.5) * (h[1][j] - h[2][j]);
      kt[(6 + j) * c + ci] = T(0.5) * (h[1][j] + h[2][j]) + h[3][j];
    }
  }
}

// The large buffers of a pass (transformed kernels, input and GEMM-result points), kept
// per thread between calls and grown as needed: fresh multi-megabyte vectors would be
// page-faulted in and zeroed on every call, which on 4x4 maps costs a tenth of the pass.
// Slots: 0 kernels, 1 input points, 2 result or gradient points, 3 the weight gradient.
// Contents are not initialized.
template <typename T>
T* scratch(int slot, int64_t n) {
  thread_local std::vector<T> buffers[4];
  std::vector<T>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// U (16, O, C): U[xi][o][c] = (G k G^T)[xi] for the 3x3 kernel k(i, j) = kernel(o, c, i, j),
// U[xi] at xi * point_stride(O, C). Returns scratch slot 0.
template <typename T, typename Kernel>
const T* transform_kernels(int64_t o, int64_t c, Kernel kernel) {
  T* u = scratch<T>(0, kPoints * point_stride(o, c));
  std::vector<T> k(9 * c);
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t ci = 0; ci < c; ++ci)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) k[(i * 3 + j) * c + ci] = kernel(oc, ci, i, j);
    kernel_points(k.data(), c, u + oc * c, point_stride(o, c));
  }
  return u;
}

// Tiles per chunk: the chunk's transformed inputs and GEMM results (16 (C + O) values per
// tile) should share a core's L2 cache with the transformed kernels (16 O C values), taken
// as kCacheBytes. Measured on the tokenizer's shapes (one thread): 256 tiles with 32
// channels, 128 with 64 and 32 with 128 beat a fixed 256 by up to 20%.
constexpr int64_t kCacheBytes = 5 << 18;  // 1.25 MiB
constexpr int64_t kMinChunkTiles = 32, kMaxChunkTiles = 256;

int64_t chunk_tiles_for(const ConvGeometry& g, int64_t elem_size) {
  const int64_t kernels = kPoints * g.o * g.c * elem_size;
  const int64_t per_tile = kPoints * (g.c + g.o) * elem_size;
  return std::clamp<int64_t>((kCacheBytes - kernels) / per_tile, kMinChunkTiles, kMaxChunkTiles);
}

// Tile rows of m samples cut into chunks: k whole samples a chunk where chunk_tiles_for
// holds a sample's rows or more (winograd_samples_per_chunk), else each sample's rows cut
// into `pieces` even pieces. A chunk's tiles, and so the GEMMs' sizes and their sums'
// bits, then do not depend on where the m samples begin in the batch, as long as it is at
// a multiple of k (conv.cpp splits the batch over the threads so).
struct Chunking {
  ImageGrid im;
  int64_t sample_rows, total_rows;
  int64_t chunk_rows = 0;  // whole samples: k of them; cut samples: the largest piece
  int64_t pieces = 0;      // pieces a sample is cut into (0: chunks of whole samples)
  int64_t chunk_tiles = 0;
  Chunking(const ConvGeometry& g, int64_t m, int64_t elem_size)
      : im{g.d, g.h, g.w, (g.h + 1) / 2, (g.w + 1) / 2},
        sample_rows(g.d * im.th),
        total_rows(m * sample_rows) {
    const int64_t fits = std::max<int64_t>(chunk_tiles_for(g, elem_size) / im.tw, 1);
    if (fits >= sample_rows) {
      chunk_rows = fits / sample_rows * sample_rows;
      chunk_tiles = std::min(chunk_rows, std::max<int64_t>(total_rows, 1)) * im.tw;
    } else {
      pieces = (sample_rows + fits - 1) / fits;
      chunk_rows = (sample_rows + pieces - 1) / pieces;
      chunk_tiles = chunk_rows * im.tw;
    }
  }
  // The rows of the chunk that starts at row r0 (the start of a chunk).
  int64_t rows_at(int64_t r0) const {
    if (pieces == 0) return std::min(chunk_rows, total_rows - r0);
    // Piece p of a sample starts at row p * sample_rows / pieces (rounded down) of it.
    const int64_t off = r0 % sample_rows, p = (off * pieces + sample_rows - 1) / sample_rows;
    return (p + 1) * sample_rows / pieces - off;
  }
};

// dst (m, O, D, H, W) = same3x3(src (m, C, D, H, W)) with transformed kernels u (16, O, C).
template <typename T>
void convolve(const ConvGeometry& g, int64_t c, int64_t o, const T* u, const T* bias, const T* src,
              int64_t m, T* dst) {
  const Chunking ch(g, m, sizeof(T));
  T* v = scratch<T>(1, kPoints * point_stride(c, ch.chunk_tiles));
  T* mm = scratch<T>(2, kPoints * point_stride(o, ch.chunk_tiles));
  std::vector<T> pad(4 * (2 * ch.im.tw + 2), T(0)), rows2(4 * ch.im.tw);
  const WinogradTransforms<T>& transforms = winograd_transforms<T>();
  for (int64_t r0 = 0, rows = 0; r0 < ch.total_rows; r0 += rows) {
    rows = ch.rows_at(r0);
    const int64_t nt = rows * ch.im.tw;
    transforms.inputs(ch.im, c, src, r0, rows, v, pad.data());
    for (int64_t xi = 0; xi < kPoints; ++xi)
      blas_gemm(false, false, o, nt, c, u + xi * point_stride(o, c), c,
                v + xi * point_stride(c, nt), nt, T(0), mm + xi * point_stride(o, nt), nt);
    transforms.outputs(ch.im, o, mm, bias, r0, rows, dst, rows2.data());
  }
}

}  // namespace

bool winograd_applies(const ConvGeometry& g) {
  return g.is_dense() && g.groups == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 &&
         g.pad_h == 1 && g.pad_w == 1 && g.oh == g.h && g.ow == g.w && g.kd == 1 && g.sd == 1 &&
         g.pad_d == 0 && g.od == g.d && g.c >= kMinChannels && g.o >= kMinChannels;
}

template <typename T>
void winograd_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, int64_t m,
                      T* out) {
  const auto u = transform_kernels<T>(g.o, g.c, [&](int64_t oc, int64_t ci, int i, int j) {
    return w[((oc * g.c + ci) * 3 + i) * 3 + j];
  });
  convolve(g, g.c, g.o, u, bias, x, m, out);
}

template <typename T>
void winograd_backward_data(const ConvGeometry& g, const T* grad_out, const T* w, int64_t m,
                            T* grad_x) {
  // Kernel (c <- o) at (i, j) is w(o, c, 2 - i, 2 - j).
  const auto u = transform_kernels<T>(g.c, g.o, [&](int64_t ci, int64_t oc, int i, int j) {
    return w[((oc * g.c + ci) * 3 + 2 - i) * 3 + 2 - j];
  });
  convolve(g, g.o, g.c, u, static_cast<const T*>(nullptr), grad_out, m, grad_x);
}

template <typename T>
void winograd_backward_weight(const ConvGeometry& g, const T* x, const T* grad_out, int64_t m,
                              T* grad_w) {
  // dU[xi] (O, C) = sum over tiles of (A g A^T)[xi] (O, T) @ (B^T d B)[xi]^T (T, C),
  // then grad_w = G^T dU G per (o, c).
  const int64_t c = g.c, o = g.o;
  const Chunking ch(g, m, sizeof(T));
  T* v = scratch<T>(1, kPoints * point_stride(c, ch.chunk_tiles));
  T* gv = scratch<T>(2, kPoints * point_stride(o, ch.chunk_tiles));
  std::vector<T> pad(4 * (2 * ch.im.tw + 2), T(0)), rows2(4 * ch.im.tw, T(0));
  T* du = scratch<T>(3, kPoints * point_stride(o, c));  // dU[xi] at xi * point_stride(o, c)
  std::fill_n(du, kPoints * point_stride(o, c), T(0));
  const WinogradTransforms<T>& transforms = winograd_transforms<T>();
  for (int64_t r0 = 0, rows = 0; r0 < ch.total_rows; r0 += rows) {
    rows = ch.rows_at(r0);
    const int64_t nt = rows * ch.im.tw;
    transforms.inputs(ch.im, c, x, r0, rows, v, pad.data());
    transforms.grads(ch.im, o, grad_out, r0, rows, gv, rows2.data());
    for (int64_t xi = 0; xi < kPoints; ++xi)
      blas_gemm(false, true, o, c, nt, gv + xi * point_stride(o, nt), nt,
                v + xi * point_stride(c, nt), nt, T(1), du + xi * point_stride(o, c), c);
  }
  std::vector<T> kt(9 * c);  // one output channel's kernel gradients, tap-major
  for (int64_t oc = 0; oc < o; ++oc) {
    kernel_gradients(du + oc * c, point_stride(o, c), c, kt.data());
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < 9; ++t) grad_w[(oc * c + ci) * 9 + t] = kt[t * c + ci];
  }
}

int64_t winograd_samples_per_chunk(const ConvGeometry& g, int64_t elem_size) {
  const Chunking ch(g, 1, elem_size);
  return ch.pieces == 0 ? ch.chunk_rows / ch.sample_rows : 1;
}

#define ZT_WINOGRAD_INSTANTIATE(T)                                                               \
  template void winograd_forward<T>(const ConvGeometry&, const T*, const T*, const T*, int64_t,  \
                                    T*);                                                         \
  template void winograd_backward_data<T>(const ConvGeometry&, const T*, const T*, int64_t, T*); \
  template void winograd_backward_weight<T>(const ConvGeometry&, const T*, const T*, int64_t, T*);
ZT_WINOGRAD_INSTANTIATE(float)
ZT_WINOGRAD_INSTANTIATE(double)
#undef ZT_WINOGRAD_INSTANTIATE

}  // namespace zt::cpu
