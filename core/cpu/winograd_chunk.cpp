// The chunk transforms of winograd_chunk.h. One template per transform loops over the
// (channel, tile row) pairs of a chunk and runs the row kernels of winograd_tiles.h for a
// lane type L; it is compiled into a function per ISA (f32x16 with AVX-512, f32x8 with
// AVX2, f32x4 on the baseline) and once for f64 with scalar tiles. The row kernels inline
// into the loop: a chunk of 32 channels x 16 rows is one call, not 512.
// The wide-vector helpers are always inlined into functions built for their ISA, so GCC's
// note that passing such vectors by value changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "core/cpu/winograd_chunk.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/winograd_tiles.h"

namespace zt::cpu {

namespace {

namespace tiles = winograd_tiles;

// GCC turns a copy loop into a call to memmove; its optimize attribute keeps the loop. Clang
// knows no such attribute (it warns of it) and has no per-function switch for this.
#if defined(__GNUC__) && !defined(__clang__)
#define ZT_KEEP_COPY_LOOP __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define ZT_KEEP_COPY_LOOP
#endif

// dst[0, n) = src[0, n) for the short image rows of small maps (a 4x4 map copies rows of
// 4 floats): a plain loop, not a call into memmove, which costs more than the copy.
template <typename T>
ZT_KEEP_COPY_LOOP __attribute__((always_inline)) inline void copy_row(const T* src, int64_t n,
                                                                      T* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Tile rows [r0, r0 + rows) of a chunk in a tensor of `channels` channels: tile row r of
// channel ch lies in the image at plane[r - r0] + ch * stride, from its row top[r - r0] =
// 2 (r mod th). Worked out once per chunk: the transforms visit every (channel, tile row),
// and on small maps the divisions cost about as much as the transform of the row.
struct ChunkRows {
  std::vector<int64_t> plane, top;
  int64_t stride;
  ChunkRows(const ImageGrid& im, int64_t channels, int64_t r0, int64_t rows)
      : plane(rows), top(rows), stride(im.d * im.h * im.w) {
    for (int64_t i = 0; i < rows; ++i) {
      plane[i] = im.plane(channels, r0 + i, 0);
      top[i] = 2 * ((r0 + i) % im.th);
    }
  }
};

// True for vector lane types; they also take 4x4 images whole (tiles::input_image4, ...)
// and read input rows in place where W = 2 tw with tw a multiple of 4.
template <typename L>
constexpr bool kVector = !std::is_arithmetic_v<L>;

template <typename L>
bool whole_image4(const ImageGrid& im) {
  return kVector<L> && im.w == 4 && im.h == 4;
}

// Inputs. Padded rows: `pad` holds 4 rows of 2 tw + 2, zero outside columns [1, W].
// Consecutive tile rows of an image overlap by two image rows, so the four row buffers
// rotate and each image row is copied once.
template <typename L, typename T>
__attribute__((always_inline)) inline void transform_inputs(const ImageGrid& im, int64_t c,
                                                            const T* src, int64_t r0, int64_t rows,
                                                            T* v, T* pad) {
  const int64_t wp = 2 * im.tw + 2, nt = rows * im.tw, ps = point_stride(c, nt);
  const ChunkRows cr(im, c, r0, rows);
  if constexpr (kVector<L>) {
    if (im.w == 2 * im.tw && im.tw % 4 == 0) {  // rows read in place
      const std::vector<float> zeros(im.w, 0.0f);
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < rows; ++i) {
          const float* plane = src + cr.plane[i] + ch * cr.stride;
          const float* d[4];
          for (int64_t k = 0; k < 4; ++k) {
            const int64_t y = cr.top[i] - 1 + k;
            d[k] = y >= 0 && y < im.h ? plane + y * im.w : zeros.data();
          }
          tiles::input_row_direct<L>(d, im.tw, v + ch * nt + i * im.tw, ps);
        }
      return;
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    T* d[4] = {pad, pad + wp, pad + 2 * wp, pad + 3 * wp};
    for (int64_t i = 0; i < rows; ++i) {
      const T* plane = src + cr.plane[i] + ch * cr.stride;
      if constexpr (kVector<L>) {
        if (whole_image4<L>(im) && cr.top[i] == 0 && i + 1 < rows) {  // both tile rows
          tiles::input_image4(plane, v + ch * nt + i * im.tw, ps);
          ++i;
          continue;
        }
      }
      int64_t k = 0;
      if (i > 0 && cr.top[i] != 0) {  // its rows 0, 1 are the last tile row's 2, 3
        std::swap(d[0], d[2]);
        std::swap(d[1], d[3]);
        k = 2;
      }
      for (; k < 4; ++k) {
        const int64_t y = cr.top[i] - 1 + k;
        if (y >= 0 && y < im.h) {
          copy_row(plane + y * im.w, im.w, d[k] + 1);
        } else {
          std::fill_n(d[k] + 1, im.w, T(0));
        }
      }
      const T* const rows4[4] = {d[0], d[1], d[2], d[3]};
      tiles::input_row<L>(rows4, im.tw, v + ch * nt + i * im.tw, ps);
    }
  }
}

// Outputs. Whole tiles (even W, both rows inside the image) are written in place; the
// others go through `rows2`, 2 rows of 2 tw, and only their image part is copied.
template <typename L, typename T>
__attribute__((always_inline)) inline void transform_outputs(const ImageGrid& im, int64_t o,
                                                             const T* mm, const T* bias, int64_t r0,
                                                             int64_t rows, T* dst, T* rows2) {
  const int64_t nt = rows * im.tw, ps = point_stride(o, nt);
  const ChunkRows cr(im, o, r0, rows);
  for (int64_t oc = 0; oc < o; ++oc) {
    const T b = bias ? bias[oc] : T(0);
    for (int64_t i = 0; i < rows; ++i) {
      T* plane = dst + cr.plane[i] + oc * cr.stride;
      const T* m = mm + oc * nt + i * im.tw;
      if constexpr (kVector<L>) {
        if (whole_image4<L>(im) && cr.top[i] == 0 && i + 1 < rows) {
          tiles::output_image4(m, ps, b, plane);
          ++i;
          continue;
        }
      }
      const int64_t y = cr.top[i];
      const bool whole = 2 * im.tw == im.w && y + 1 < im.h;
      T* y0 = whole ? plane + y * im.w : rows2;
      T* y1 = whole ? y0 + im.w : rows2 + 2 * im.tw;
      tiles::output_row<L>(m, ps, b, im.tw, y0, y1);
      if (whole) continue;
      copy_row(y0, im.w, plane + y * im.w);
      if (y + 1 < im.h) copy_row(y1, im.w, plane + (y + 1) * im.w);
    }
  }
}

// Output gradients. Whole tiles are read in place; the others are copied into `rows2`,
// 2 rows of 2 tw, zero past column W.
template <typename L, typename T>
__attribute__((always_inline)) inline void transform_grads(const ImageGrid& im, int64_t o,
                                                           const T* grad, int64_t r0, int64_t rows,
                                                           T* v, T* rows2) {
  const int64_t nt = rows * im.tw, ps = point_stride(o, nt);
  T* g0 = rows2;
  T* g1 = rows2 + 2 * im.tw;
  const ChunkRows cr(im, o, r0, rows);
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t i = 0; i < rows; ++i) {
      const T* plane = grad + cr.plane[i] + oc * cr.stride;
      const int64_t y = cr.top[i];
      T* v_row = v + oc * nt + i * im.tw;
      if constexpr (kVector<L>) {
        if (whole_image4<L>(im) && y == 0 && i + 1 < rows) {
          tiles::grad_image4(plane, v_row, ps);
          ++i;
          continue;
        }
      }
      if (2 * im.tw == im.w && y + 1 < im.h) {
        tiles::grad_row<L>(plane + y * im.w, plane + (y + 1) * im.w, im.tw, v_row, ps);
        continue;
      }
      copy_row(plane + y * im.w, im.w, g0);
      if (y + 1 < im.h) {
        copy_row(plane + (y + 1) * im.w, im.w, g1);
      } else {
        std::fill_n(g1, im.w, T(0));
      }
      tiles::grad_row<L>(g0, g1, im.tw, v_row, ps);
    }
}

// The three loops as functions for element type T and lane type L, built with `attr`.
#define ZT_WINOGRAD_TRANSFORMS(name, attr, T, L)                                                   \
  attr void name##_inputs(const ImageGrid& im, int64_t c, const T* src, int64_t r0, int64_t rows,  \
                          T* v, T* pad) {                                                          \
    transform_inputs<L>(im, c, src, r0, rows, v, pad);                                             \
  }                                                                                                \
  attr void name##_outputs(const ImageGrid& im, int64_t o, const T* mm, const T* bias, int64_t r0, \
                           int64_t rows, T* dst, T* rows2) {                                       \
    transform_outputs<L>(im, o, mm, bias, r0, rows, dst, rows2);                                   \
  }                                                                                                \
  attr void name##_grads(const ImageGrid& im, int64_t o, const T* grad, int64_t r0, int64_t rows,  \
                         T* v, T* rows2) {                                                         \
    transform_grads<L>(im, o, grad, r0, rows, v, rows2);                                           \
  }                                                                                                \
  constexpr WinogradTransforms<T> k_##name{name##_inputs, name##_outputs, name##_grads};
ZT_WINOGRAD_TRANSFORMS(avx512, __attribute__((target(ZT_TARGET_AVX512))), float, f32x16)
ZT_WINOGRAD_TRANSFORMS(avx2, __attribute__((target(ZT_TARGET_AVX2))), float, f32x8)
ZT_WINOGRAD_TRANSFORMS(sse2, , float, f32x4)
ZT_WINOGRAD_TRANSFORMS(scalar, , float, float)
ZT_WINOGRAD_TRANSFORMS(f64, , double, double)
#undef ZT_WINOGRAD_TRANSFORMS

}  // namespace

const WinogradTransforms<float>& winograd_transforms_f32(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return k_avx512;
    case Isa::kAvx2:
      return k_avx2;
    case Isa::kSse2:
      break;
  }
  return k_sse2;
}

const WinogradTransforms<float>& winograd_transforms_f32_scalar() {
  return k_scalar;
}

template <>
const WinogradTransforms<float>& winograd_transforms<float>() {
  return winograd_transforms_f32(cpu_isa());
}

template <>
const WinogradTransforms<double>& winograd_transforms<double>() {
  return k_f64;
}

}  // namespace zt::cpu
