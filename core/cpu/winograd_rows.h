// Tile-row kernels of the CPU Winograd F(2x2, 3x3) convolution (internal to
// core/cpu/winograd.cpp, see winograd.h for the transforms): one tile row at a time, its
// four input rows -> the 16 points of its tw tiles, point xi of tile x at v[xi * ps + x];
// the 16 GEMM results of each tile -> two output rows; two output-gradient rows -> their
// tiles' points. Input rows are zero-padded (column 0 is the left pad, 2 tw + 2 columns);
// output and gradient rows have 2 tw columns. f32 runs AVX2 code where the CPU has it,
// with the arithmetic of the scalar code in every lane, so results do not depend on it.
#pragma once

#include <cstdint>

namespace zt::cpu {

/// v[xi * ps + x] <- the points B^T d B of tiles x < tw from padded input rows d[0..3].
void input_row(const float* const d[4], int64_t tw, float* v, int64_t ps);
void input_row(const double* const d[4], int64_t tw, double* v, int64_t ps);

/// y0, y1 (2 tw columns) <- A^T m A + bias of tiles x < tw, their points at m[xi * ps + x].
void output_row(const float* m, int64_t ps, float bias, int64_t tw, float* y0, float* y1);
void output_row(const double* m, int64_t ps, double bias, int64_t tw, double* y0, double* y1);

/// v[xi * ps + x] <- the points A g A^T of the 2x2 gradient tiles x < tw of rows g0, g1.
void grad_row(const float* g0, const float* g1, int64_t tw, float* v, int64_t ps);
void grad_row(const double* g0, const double* g1, int64_t tw, double* v, int64_t ps);

/// True when this CPU runs the AVX2 kernels; the four below need it.
bool has_avx2();

/// input_row on unpadded image rows d[k] (column 0 first, a row of zeros for padding
/// rows), W = 2 tw with tw a multiple of 8: the rows are read in place, not copied.
void input_row_direct(const float* const d[4], int64_t tw, float* v, int64_t ps);

/// A whole 4x4 image (16 contiguous values, two tile rows of two tiles whose points are
/// consecutive): its tiles' points, its outputs, its gradient tiles' points.
void input_image4(const float* image, float* v, int64_t ps);
void output_image4(const float* m, int64_t ps, float bias, float* image);
void grad_image4(const float* image, float* v, int64_t ps);

}  // namespace zt::cpu
