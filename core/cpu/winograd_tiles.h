// Tile kernels of the CPU Winograd F(2x2, 3x3) convolution (see winograd.h for the
// transforms), private to core/cpu/winograd_chunk.cpp, where they are compiled once per
// ISA. Each is written for a lane type L: a vector of lanes.h (f32x16, f32x8, f32x4:
// that many tiles at a time) or a scalar T (one tile). A row function takes the widest
// lane type of its ISA and finishes the row with narrower ones, down to single tiles.
// Layout: point xi of tile x of a row at v[xi * ps + x] (m for the GEMM results); input
// rows zero-padded (column 0 the left pad, 2 tw + 2 columns) unless read in place;
// output and gradient rows of 2 tw columns.
// Every lane does the arithmetic of the scalar code in the same order (additions and
// subtractions only), so every ISA and width gives the same bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cpu/lanes.h"

namespace zt::cpu::winograd_tiles {

// Tiles per lane type, and the next narrower lane type (f32x4 -> float: single tiles).
template <typename L>
constexpr int64_t kTiles = std::is_arithmetic_v<L> ? 1 : sizeof(L) / sizeof(float);
template <typename L>
struct NarrowerOf {
  using type = L;
};
template <>
struct NarrowerOf<f32x16> {
  using type = f32x8;
};
template <>
struct NarrowerOf<f32x8> {
  using type = f32x4;
};
template <>
struct NarrowerOf<f32x4> {
  using type = float;
};
template <typename L>
using Narrower = typename NarrowerOf<L>::type;

// ---------------------------------------------------------------- single tiles, tiles x..tw-1

template <typename T>
__attribute__((always_inline)) inline void input_tiles_scalar(const T* const d[4], int64_t tw, T* v,
                                                              int64_t ps, int64_t x) {
  for (; x < tw; ++x) {
    T u[4][4];  // B^T d: columns 2x .. 2x+3 of the four rows
    for (int64_t j = 0; j < 4; ++j) {
      const T d0 = d[0][2 * x + j], d1 = d[1][2 * x + j], d2 = d[2][2 * x + j],
              d3 = d[3][2 * x + j];
      u[0][j] = d0 - d2;
      u[1][j] = d1 + d2;
      u[2][j] = d2 - d1;
      u[3][j] = d1 - d3;
    }
    for (int64_t i = 0; i < 4; ++i) {  // (B^T d) B
      T* o = v + 4 * i * ps + x;
      o[0] = u[i][0] - u[i][2];
      o[ps] = u[i][1] + u[i][2];
      o[2 * ps] = u[i][2] - u[i][1];
      o[3 * ps] = u[i][1] - u[i][3];
    }
  }
}

template <typename T>
__attribute__((always_inline)) inline void output_tiles_scalar(const T* m, int64_t ps, T bias,
                                                               int64_t tw, T* y0, T* y1,
                                                               int64_t x) {
  for (; x < tw; ++x) {
    T s[4][2];  // m A, row by row
    for (int64_t i = 0; i < 4; ++i) {
      const T* mi = m + 4 * i * ps + x;
      s[i][0] = mi[0] + mi[ps] + mi[2 * ps];
      s[i][1] = mi[ps] - mi[2 * ps] - mi[3 * ps];
    }
    y0[2 * x] = s[0][0] + s[1][0] + s[2][0] + bias;
    y0[2 * x + 1] = s[0][1] + s[1][1] + s[2][1] + bias;
    y1[2 * x] = s[1][0] - s[2][0] - s[3][0] + bias;
    y1[2 * x + 1] = s[1][1] - s[2][1] - s[3][1] + bias;
  }
}

// The 2x2 gradient tile of rows g0, g1 -> its 16 points A g A^T.
template <typename T>
__attribute__((always_inline)) inline void grad_tiles_scalar(const T* g0, const T* g1, int64_t tw,
                                                             T* v, int64_t ps, int64_t x) {
  for (; x < tw; ++x) {
    const T a = g0[2 * x], b = g0[2 * x + 1], c = g1[2 * x], d = g1[2 * x + 1];
    const T t[4][2] = {{a, b}, {a + c, b + d}, {a - c, b - d}, {-c, -d}};  // A g
    for (int64_t i = 0; i < 4; ++i) {                                      // (A g) A^T
      T* o = v + 4 * i * ps + x;
      o[0] = t[i][0];
      o[ps] = t[i][0] + t[i][1];
      o[2 * ps] = t[i][0] - t[i][1];
      o[3 * ps] = -t[i][1];
    }
  }
}

// ---------------------------------------------------------------- vectors of tiles

// Unaligned access through memcpy (one vmovups): an under-aligned vector typedef is a GCC
// extension that clang ignores, and its aligned loads then fault on unaligned rows.
template <typename V>
__attribute__((always_inline)) inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
__attribute__((always_inline)) inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Shuffles of a vector of tiles: the even and odd lanes of (a, b) concatenated (column 0
// and 1 of each tile), (a, b) interleaved (its first and second half), and a shifted by
// one lane with a zero let in at the left or at the right (the padding columns).
__attribute__((always_inline)) inline f32x16 evens(f32x16 a, f32x16 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
__attribute__((always_inline)) inline f32x16 odds(f32x16 a, f32x16 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}
__attribute__((always_inline)) inline f32x16 zip_lo(f32x16 a, f32x16 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
__attribute__((always_inline)) inline f32x16 zip_hi(f32x16 a, f32x16 b) {
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15,
                                 31);
}
__attribute__((always_inline)) inline f32x16 zero_left(f32x16 a) {
  return __builtin_shufflevector(f32x16{}, a, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                                 29, 30);
}
__attribute__((always_inline)) inline f32x16 zero_right(f32x16 a) {
  return __builtin_shufflevector(a, f32x16{}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                 16);
}
__attribute__((always_inline)) inline f32x8 evens(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
}
__attribute__((always_inline)) inline f32x8 odds(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}
__attribute__((always_inline)) inline f32x8 zip_lo(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
}
__attribute__((always_inline)) inline f32x8 zip_hi(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
}
__attribute__((always_inline)) inline f32x8 zero_left(f32x8 a) {
  return __builtin_shufflevector(f32x8{}, a, 0, 8, 9, 10, 11, 12, 13, 14);
}
__attribute__((always_inline)) inline f32x8 zero_right(f32x8 a) {
  return __builtin_shufflevector(a, f32x8{}, 1, 2, 3, 4, 5, 6, 7, 8);
}
__attribute__((always_inline)) inline f32x4 evens(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6);
}
__attribute__((always_inline)) inline f32x4 odds(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7);
}
__attribute__((always_inline)) inline f32x4 zip_lo(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 0, 4, 1, 5);
}
__attribute__((always_inline)) inline f32x4 zip_hi(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 2, 6, 3, 7);
}
__attribute__((always_inline)) inline f32x4 zero_left(f32x4 a) {
  return __builtin_shufflevector(f32x4{}, a, 0, 4, 5, 6);
}
__attribute__((always_inline)) inline f32x4 zero_right(f32x4 a) {
  return __builtin_shufflevector(a, f32x4{}, 1, 2, 3, 4);
}

// The 16 points of a vector of tiles from the loads of their four rows at columns 2x
// (lo), 2x + w (hi), 2x + 2 (lo2) and 2x + 2 + w (hi2), w = kTiles<V>: B^T d down the
// columns of each load, then (B^T d) B across the even and odd lanes.
template <typename V>
__attribute__((always_inline)) inline void input_tiles(const V lo[4], const V hi[4], const V lo2[4],
                                                       const V hi2[4], float* v, int64_t ps) {
  V u[4][4];  // [load][row combination]
  const V* loads[4] = {lo, hi, lo2, hi2};
  for (int l = 0; l < 4; ++l) {
    const V* r = loads[l];
    u[l][0] = r[0] - r[2];
    u[l][1] = r[1] + r[2];
    u[l][2] = r[2] - r[1];
    u[l][3] = r[1] - r[3];
  }
  for (int i = 0; i < 4; ++i) {
    float* o = v + 4 * i * ps;
    const V e0 = evens(u[0][i], u[1][i]), e1 = odds(u[0][i], u[1][i]);
    const V e2 = evens(u[2][i], u[3][i]), e3 = odds(u[2][i], u[3][i]);
    store(o, e0 - e2);
    store(o + ps, e1 + e2);
    store(o + 2 * ps, e2 - e1);
    store(o + 3 * ps, e1 - e3);
  }
}

// The outputs A^T m A (+ bias) of a vector of tiles from their points at m + xi * ps:
// y[r][c] holds row r, column c of each tile.
template <typename V>
__attribute__((always_inline)) inline void output_tiles(const float* m, int64_t ps, float bias,
                                                        V y[2][2]) {
  V s[4][2];  // m A, row by row
  for (int i = 0; i < 4; ++i) {
    const float* mi = m + 4 * i * ps;
    const V m0 = load<V>(mi), m1 = load<V>(mi + ps), m2 = load<V>(mi + 2 * ps);
    const V m3 = load<V>(mi + 3 * ps);
    s[i][0] = m0 + m1 + m2;
    s[i][1] = m1 - m2 - m3;
  }
  y[0][0] = s[0][0] + s[1][0] + s[2][0] + bias;
  y[0][1] = s[0][1] + s[1][1] + s[2][1] + bias;
  y[1][0] = s[1][0] - s[2][0] - s[3][0] + bias;
  y[1][1] = s[1][1] - s[2][1] - s[3][1] + bias;
}

// The 16 points A g A^T of a vector of tiles whose first rows are the even (column 0) and
// odd (column 1) lanes of (lo0, hi0), and second rows those of (lo1, hi1).
template <typename V>
__attribute__((always_inline)) inline void grad_tiles(V lo0, V hi0, V lo1, V hi1, float* v,
                                                      int64_t ps) {
  const V a = evens(lo0, hi0), b = odds(lo0, hi0), c = evens(lo1, hi1), d = odds(lo1, hi1);
  const V t[4][2] = {{a, b}, {a + c, b + d}, {a - c, b - d}, {-c, -d}};  // A g
  for (int i = 0; i < 4; ++i) {                                          // (A g) A^T
    float* o = v + 4 * i * ps;
    store(o, t[i][0]);
    store(o + ps, t[i][0] + t[i][1]);
    store(o + 2 * ps, t[i][0] - t[i][1]);
    store(o + 3 * ps, -t[i][1]);
  }
}

// ---------------------------------------------------------------- rows

/// v[xi * ps + x] <- the points B^T d B of tiles x..tw-1 from padded input rows d[0..3].
template <typename L, typename T>
__attribute__((always_inline)) inline void input_row(const T* const d[4], int64_t tw, T* v,
                                                     int64_t ps, int64_t x = 0) {
  if constexpr (std::is_same_v<L, T>) {
    input_tiles_scalar(d, tw, v, ps, x);
  } else {
    constexpr int64_t w = kTiles<L>;
    for (; x + w <= tw; x += w) {
      L lo[4], hi[4], lo2[4], hi2[4];
      for (int k = 0; k < 4; ++k) {
        lo[k] = load<L>(d[k] + 2 * x);
        hi[k] = load<L>(d[k] + 2 * x + w);
        lo2[k] = load<L>(d[k] + 2 * x + 2);
        hi2[k] = load<L>(d[k] + 2 * x + 2 + w);
      }
      input_tiles(lo, hi, lo2, hi2, v + x, ps);
    }
    input_row<Narrower<L>>(d, tw, v, ps, x);
  }
}

/// input_row on unpadded image rows d[k] (column 0 first; a row of zeros for padding
/// rows) of W = 2 tw columns, tw a multiple of 4: the zero columns left of column 0 and
/// right of column W - 1 are shifted into the first and last loads instead of read.
template <typename V>
__attribute__((always_inline)) inline void input_row_direct(const float* const d[4], int64_t tw,
                                                            float* v, int64_t ps, int64_t x = 0) {
  if constexpr (kTiles<V> >= 4) {
    constexpr int64_t w = kTiles<V>;
    for (; x + w <= tw; x += w) {
      const int64_t c = 2 * x - 1;  // image column of padded column 2x
      V lo[4], hi[4], lo2[4], hi2[4];
      for (int k = 0; k < 4; ++k) {
        lo[k] = x == 0 ? zero_left(load<V>(d[k])) : load<V>(d[k] + c);
        hi[k] = load<V>(d[k] + c + w);
        lo2[k] = load<V>(d[k] + c + 2);
        hi2[k] = x + w == tw ? zero_right(load<V>(d[k] + c + w + 1)) : load<V>(d[k] + c + w + 2);
      }
      input_tiles(lo, hi, lo2, hi2, v + x, ps);
    }
    input_row_direct<Narrower<V>>(d, tw, v, ps, x);
  }
}

/// y0, y1 (2 tw columns) <- A^T m A + bias of tiles x..tw-1, their points at m[xi * ps + x].
template <typename L, typename T>
__attribute__((always_inline)) inline void output_row(const T* m, int64_t ps, T bias, int64_t tw,
                                                      T* y0, T* y1, int64_t x = 0) {
  if constexpr (std::is_same_v<L, T>) {
    output_tiles_scalar(m, ps, bias, tw, y0, y1, x);
  } else {
    constexpr int64_t w = kTiles<L>;
    for (; x + w <= tw; x += w) {
      L y[2][2];
      output_tiles(m + x, ps, bias, y);
      store(y0 + 2 * x, zip_lo(y[0][0], y[0][1]));
      store(y0 + 2 * x + w, zip_hi(y[0][0], y[0][1]));
      store(y1 + 2 * x, zip_lo(y[1][0], y[1][1]));
      store(y1 + 2 * x + w, zip_hi(y[1][0], y[1][1]));
    }
    output_row<Narrower<L>>(m, ps, bias, tw, y0, y1, x);
  }
}

/// v[xi * ps + x] <- the points A g A^T of the 2x2 gradient tiles x..tw-1 of rows g0, g1.
template <typename L, typename T>
__attribute__((always_inline)) inline void grad_row(const T* g0, const T* g1, int64_t tw, T* v,
                                                    int64_t ps, int64_t x = 0) {
  if constexpr (std::is_same_v<L, T>) {
    grad_tiles_scalar(g0, g1, tw, v, ps, x);
  } else {
    constexpr int64_t w = kTiles<L>;
    for (; x + w <= tw; x += w)
      grad_tiles(load<L>(g0 + 2 * x), load<L>(g0 + 2 * x + w), load<L>(g1 + 2 * x),
                 load<L>(g1 + 2 * x + w), v + x, ps);
    grad_row<Narrower<L>>(g0, g1, tw, v, ps, x);
  }
}

// ---------------------------------------------------------------- 4x4 images

// A whole 4x4 image (16 contiguous values) is two tile rows of two tiles whose points are
// consecutive: one f32x4 per point, lanes = tiles (0, 0), (0, 1), (1, 0), (1, 1).

/// The points of the image's four tiles.
__attribute__((always_inline)) inline void input_image4(const float* image, float* v, int64_t ps) {
  // Padded columns 0..3 (a) and 2..5 (b) of padded rows -1..4, as for two tile rows.
  f32x4 a[6] = {}, b[6] = {};
  for (int k = 0; k < 4; ++k) {
    const f32x4 r = load<f32x4>(image + 4 * k);
    a[k + 1] = zero_left(r);
    b[k + 1] = zero_right(r);
  }
  input_tiles(a, a + 2, b, b + 2, v, ps);
}

/// The image <- A^T m A (+ bias) of its four tiles' points at m.
__attribute__((always_inline)) inline void output_image4(const float* m, int64_t ps, float bias,
                                                         float* image) {
  f32x4 y[2][2];
  output_tiles(m, ps, bias, y);
  store(image, zip_lo(y[0][0], y[0][1]));
  store(image + 4, zip_lo(y[1][0], y[1][1]));
  store(image + 8, zip_hi(y[0][0], y[0][1]));
  store(image + 12, zip_hi(y[1][0], y[1][1]));
}

/// The points of the image's four gradient tiles.
__attribute__((always_inline)) inline void grad_image4(const float* image, float* v, int64_t ps) {
  grad_tiles(load<f32x4>(image), load<f32x4>(image + 8), load<f32x4>(image + 4),
             load<f32x4>(image + 12), v, ps);
}

}  // namespace zt::cpu::winograd_tiles
