// Tile-row kernels of the CPU Winograd convolution (winograd_rows.h): scalar versions for
// any T, and AVX2 ones for f32 picked at run time (the library targets the baseline ISA).
#include "core/cpu/winograd_rows.h"

#include <cstring>

#include "core/cpu/lanes.h"

namespace zt::cpu {

namespace {

// Called by an AVX2 row kernel before its scalar (baseline SSE) tail: SSE code run while
// the upper halves of the ymm registers are dirty pays a state transition, and the
// compiler puts no vzeroupper before a tail call. Unset, the transitions cost more than
// the rows' arithmetic (the tail ran, empty, after every row).
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void clear_upper() {
  __builtin_ia32_vzeroupper();
}

template <typename T>
void input_row_scalar(const T* const d[4], int64_t tw, T* v, int64_t ps, int64_t x) {
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
void output_row_scalar(const T* m, int64_t ps, T bias, int64_t tw, T* y0, T* y1, int64_t x) {
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

// Output-gradient tiles of one tile row for the weight gradient: the 2x2 tile g of
// rows g0, g1 (2 * tw columns) -> its 16 points A g A^T at v[xi * ps + x].
template <typename T>
void grad_row_scalar(const T* g0, const T* g1, int64_t tw, T* v, int64_t ps, int64_t x) {
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

// AVX2 versions for f32 (the library targets the baseline ISA; these are picked at run
// time), eight tiles per iteration, then four (f32x4) for the rest of small maps (8x8
// images have rows of 4 tiles). Columns 2x .. 2x+3 of the tiles are the even and odd
// lanes of two loads at column 2x and two at 2x + 2. Every lane does the arithmetic of
// the scalar versions, so all widths give the same results.
// Unaligned access through memcpy (one vmovups): an under-aligned vector typedef is a GCC
// extension that clang ignores, and its aligned loads then fault on unaligned rows.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x8 load8(const float* p) {
  return load<f32x8>(p);
}

// Even and odd lanes of (a, b) concatenated, and (a, b) interleaved: its first and second
// half.
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x8 evens(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x8 odds(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x8 zip_lo(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x8 zip_hi(f32x8 a, f32x8 b) {
  return __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x4 evens(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x4 odds(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x4 zip_lo(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 0, 4, 1, 5);
}
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline f32x4 zip_hi(f32x4 a, f32x4 b) {
  return __builtin_shufflevector(a, b, 2, 6, 3, 7);
}

// Tiles per vector.
template <typename V>
constexpr int64_t kTiles = sizeof(V) / sizeof(float);

// The four points of row combination u of a vector of tiles, from its loads at columns
// 2x (lo), 2x + kTiles (hi), 2x + 2 (lo2) and 2x + 2 + kTiles (hi2), stored at o, o + ps,
// o + 2 ps, o + 3 ps.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void input_points(V lo, V hi, V lo2,
                                                                                V hi2, float* o,
                                                                                int64_t ps) {
  const V e0 = evens(lo, hi), e1 = odds(lo, hi), e2 = evens(lo2, hi2), e3 = odds(lo2, hi2);
  store(o, e0 - e2);
  store(o + ps, e1 + e2);
  store(o + 2 * ps, e2 - e1);
  store(o + 3 * ps, e1 - e3);
}

// The 16 points of a vector of tiles from the loads of their four rows at columns 2x
// (lo), 2x + kTiles (hi), 2x + 2 (lo2) and 2x + 2 + kTiles (hi2): B^T d down the columns
// of each load, then input_points.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void input_tiles(
    const V lo[4], const V hi[4], const V lo2[4], const V hi2[4], float* v, int64_t ps) {
  V u[4][4];  // [load][row combination]
  const V* loads[4] = {lo, hi, lo2, hi2};
  for (int l = 0; l < 4; ++l) {
    const V* r = loads[l];
    u[l][0] = r[0] - r[2];
    u[l][1] = r[1] + r[2];
    u[l][2] = r[2] - r[1];
    u[l][3] = r[1] - r[3];
  }
  for (int i = 0; i < 4; ++i) input_points(u[0][i], u[1][i], u[2][i], u[3][i], v + 4 * i * ps, ps);
}

// Tiles [x, x + kTiles) of input_row.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void input_block(
    const float* const d[4], int64_t x, float* v, int64_t ps) {
  constexpr int64_t w = kTiles<V>;
  V lo[4], hi[4], lo2[4], hi2[4];
  for (int k = 0; k < 4; ++k) {
    lo[k] = load<V>(d[k] + 2 * x);
    hi[k] = load<V>(d[k] + 2 * x + w);
    lo2[k] = load<V>(d[k] + 2 * x + 2);
    hi2[k] = load<V>(d[k] + 2 * x + 2 + w);
  }
  input_tiles(lo, hi, lo2, hi2, v + x, ps);
}

__attribute__((target(ZT_TARGET_AVX2))) void input_row_avx2(const float* const d[4], int64_t tw,
                                                            float* v, int64_t ps) {
  int64_t x = 0;
  for (; x + 8 <= tw; x += 8) input_block<f32x8>(d, x, v, ps);
  if (x + 4 <= tw) {
    input_block<f32x4>(d, x, v, ps);
    x += 4;
  }
  if (x < tw) {
    clear_upper();
    input_row_scalar(d, tw, v, ps, x);
  }
}

// input_row_avx2 on unpadded rows, W = 2 tw with tw a multiple of 8: d[k] is image row k
// (column 0 first), and the zero columns left of it and right of column W - 1 are
// shifted into the first and last loads instead of read, so the rows need no copy.
__attribute__((target(ZT_TARGET_AVX2))) void input_row_direct_avx2(const float* const d[4],
                                                                   int64_t tw, float* v,
                                                                   int64_t ps) {
  const f32x8 z = {};
  for (int64_t x = 0; x < tw; x += 8) {
    const int64_t c = 2 * x - 1;  // image column of padded column 2x
    f32x8 lo[4], hi[4], lo2[4], hi2[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = x == 0 ? __builtin_shufflevector(z, load8(d[k]), 0, 8, 9, 10, 11, 12, 13, 14)
                     : load8(d[k] + c);
      hi[k] = load8(d[k] + c + 8);
      lo2[k] = load8(d[k] + c + 2);
      hi2[k] = x + 8 == tw ? __builtin_shufflevector(load8(d[k] + c + 9), z, 1, 2, 3, 4, 5, 6, 7, 8)
                           : load8(d[k] + c + 10);
    }
    input_tiles(lo, hi, lo2, hi2, v + x, ps);
  }
}

// s0, s1 of one tile row i: m A from its four points at m, m + ps, ...
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void output_sums(const float* m,
                                                                               int64_t ps, V& s0,
                                                                               V& s1) {
  const V m0 = load<V>(m), m1 = load<V>(m + ps), m2 = load<V>(m + 2 * ps);
  const V m3 = load<V>(m + 3 * ps);
  s0 = m0 + m1 + m2;
  s1 = m1 - m2 - m3;
}

// The outputs A^T m A (+ bias) of a vector of tiles from their points at m + xi * ps:
// y[r][c] holds row r, column c of each tile.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void output_tiles(const float* m,
                                                                                int64_t ps,
                                                                                float bias,
                                                                                V y[2][2]) {
  V p0, q0, p1, q1, p2, q2, p3, q3;
  output_sums(m, ps, p0, q0);
  output_sums(m + 4 * ps, ps, p1, q1);
  output_sums(m + 8 * ps, ps, p2, q2);
  output_sums(m + 12 * ps, ps, p3, q3);
  y[0][0] = p0 + p1 + p2 + bias;
  y[0][1] = q0 + q1 + q2 + bias;
  y[1][0] = p1 - p2 - p3 + bias;
  y[1][1] = q1 - q2 - q3 + bias;
}

// Tiles [x, x + kTiles) of output_row.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void output_block(
    const float* m, int64_t ps, float bias, int64_t x, float* y0, float* y1) {
  constexpr int64_t w = kTiles<V>;
  V y[2][2];
  output_tiles(m + x, ps, bias, y);
  const V y00 = y[0][0], y01 = y[0][1], y10 = y[1][0], y11 = y[1][1];
  store(y0 + 2 * x, zip_lo(y00, y01));
  store(y0 + 2 * x + w, zip_hi(y00, y01));
  store(y1 + 2 * x, zip_lo(y10, y11));
  store(y1 + 2 * x + w, zip_hi(y10, y11));
}

__attribute__((target(ZT_TARGET_AVX2))) void output_row_avx2(const float* m, int64_t ps, float bias,
                                                             int64_t tw, float* y0, float* y1) {
  int64_t x = 0;
  for (; x + 8 <= tw; x += 8) output_block<f32x8>(m, ps, bias, x, y0, y1);
  if (x + 4 <= tw) {
    output_block<f32x4>(m, ps, bias, x, y0, y1);
    x += 4;
  }
  if (x < tw) {
    clear_upper();
    output_row_scalar(m, ps, bias, tw, y0, y1, x);
  }
}

// The four points of row i of A g A^T for a vector of tiles from (A g) row i: columns p, q.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void grad_points(V p, V q, float* o,
                                                                               int64_t ps) {
  store(o, p);
  store(o + ps, p + q);
  store(o + 2 * ps, p - q);
  store(o + 3 * ps, -q);
}

// The 16 points A g A^T of a vector of tiles whose first rows are the even (column 0) and
// odd (column 1) lanes of (lo0, hi0), and second rows those of (lo1, hi1).
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void grad_tiles(V lo0, V hi0, V lo1,
                                                                              V hi1, float* v,
                                                                              int64_t ps) {
  const V a = evens(lo0, hi0), b = odds(lo0, hi0), c = evens(lo1, hi1), d = odds(lo1, hi1);
  grad_points(a, b, v, ps);
  grad_points(a + c, b + d, v + 4 * ps, ps);
  grad_points(a - c, b - d, v + 8 * ps, ps);
  grad_points(-c, -d, v + 12 * ps, ps);
}

// Tiles [x, x + kTiles) of grad_row.
template <typename V>
__attribute__((target(ZT_TARGET_AVX2), always_inline)) inline void grad_block(const float* g0,
                                                                              const float* g1,
                                                                              int64_t x, float* v,
                                                                              int64_t ps) {
  constexpr int64_t w = kTiles<V>;
  grad_tiles(load<V>(g0 + 2 * x), load<V>(g0 + 2 * x + w), load<V>(g1 + 2 * x),
             load<V>(g1 + 2 * x + w), v + x, ps);
}

__attribute__((target(ZT_TARGET_AVX2))) void grad_row_avx2(const float* g0, const float* g1,
                                                           int64_t tw, float* v, int64_t ps) {
  int64_t x = 0;
  for (; x + 8 <= tw; x += 8) grad_block<f32x8>(g0, g1, x, v, ps);
  if (x + 4 <= tw) {
    grad_block<f32x4>(g0, g1, x, v, ps);
    x += 4;
  }
  if (x < tw) {
    clear_upper();
    grad_row_scalar(g0, g1, tw, v, ps, x);
  }
}

// 4x4 images (two tile rows of two tiles, consecutive in the points: one f32x4 per point,
// lanes = tiles (0, 0), (0, 1), (1, 0), (1, 1)), a whole image (16 contiguous values) at a
// time instead of scalar tile rows.
__attribute__((target(ZT_TARGET_AVX2))) void input_image4_avx2(const float* image, float* v,
                                                               int64_t ps) {
  // Padded columns 0..3 (a) and 2..5 (b) of padded rows -1..4, as for two tile rows.
  const f32x4 z = {};
  f32x4 a[6] = {}, b[6] = {};
  for (int k = 0; k < 4; ++k) {
    const f32x4 r = load<f32x4>(image + 4 * k);
    a[k + 1] = __builtin_shufflevector(z, r, 0, 4, 5, 6);
    b[k + 1] = __builtin_shufflevector(r, z, 1, 2, 3, 4);
  }
  input_tiles(a, a + 2, b, b + 2, v, ps);
}

// The image (16 contiguous values) <- A^T m A (+ bias) of its four tiles' points at m.
__attribute__((target(ZT_TARGET_AVX2))) void output_image4_avx2(const float* m, int64_t ps,
                                                                float bias, float* image) {
  f32x4 y[2][2];
  output_tiles(m, ps, bias, y);
  store(image, zip_lo(y[0][0], y[0][1]));
  store(image + 4, zip_lo(y[1][0], y[1][1]));
  store(image + 8, zip_hi(y[0][0], y[0][1]));
  store(image + 12, zip_hi(y[1][0], y[1][1]));
}

// The points of the four gradient tiles of an image (16 contiguous values).
__attribute__((target(ZT_TARGET_AVX2))) void grad_image4_avx2(const float* image, float* v,
                                                              int64_t ps) {
  grad_tiles(load<f32x4>(image), load<f32x4>(image + 8), load<f32x4>(image + 4),
             load<f32x4>(image + 12), v, ps);
}

}  // namespace

bool has_avx2() {
  return cpu_isa() >= Isa::kAvx2;
}

void input_row_direct(const float* const d[4], int64_t tw, float* v, int64_t ps) {
  input_row_direct_avx2(d, tw, v, ps);
}
void input_image4(const float* image, float* v, int64_t ps) {
  input_image4_avx2(image, v, ps);
}
void output_image4(const float* m, int64_t ps, float bias, float* image) {
  output_image4_avx2(m, ps, bias, image);
}
void grad_image4(const float* image, float* v, int64_t ps) {
  grad_image4_avx2(image, v, ps);
}

void input_row(const float* const d[4], int64_t tw, float* v, int64_t ps) {
  if (has_avx2()) return input_row_avx2(d, tw, v, ps);
  input_row_scalar(d, tw, v, ps, 0);
}
void input_row(const double* const d[4], int64_t tw, double* v, int64_t ps) {
  input_row_scalar(d, tw, v, ps, 0);
}
void output_row(const float* m, int64_t ps, float bias, int64_t tw, float* y0, float* y1) {
  if (has_avx2()) return output_row_avx2(m, ps, bias, tw, y0, y1);
  output_row_scalar(m, ps, bias, tw, y0, y1, 0);
}
void output_row(const double* m, int64_t ps, double bias, int64_t tw, double* y0, double* y1) {
  output_row_scalar(m, ps, bias, tw, y0, y1, 0);
}

void grad_row(const float* g0, const float* g1, int64_t tw, float* v, int64_t ps) {
  if (has_avx2()) return grad_row_avx2(g0, g1, tw, v, ps);
  grad_row_scalar(g0, g1, tw, v, ps, 0);
}
void grad_row(const double* g0, const double* g1, int64_t tw, double* v, int64_t ps) {
  grad_row_scalar(g0, g1, tw, v, ps, 0);
}

}  // namespace zt::cpu
