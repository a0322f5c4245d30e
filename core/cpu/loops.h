// Strided N-d loops for CPU kernels. Dims that are contiguous for every operand are
// merged, then the innermost run is handed to a callback with per-operand strides.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/parallel.h"
#include "core/tensor.h"

namespace zt::cpu {

/// Grain for parallel_for (items per chunk) so one chunk covers about 32K elements of
/// work, given the elements each item touches.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(work_per_item, 1));
}

template <size_t N>
struct Loop {
  Shape sizes;                   // coalesced sizes, innermost last
  std::array<Shape, N> strides;  // per operand, in elements
};

/// Coalesces `sizes` with each operand's strides.
template <size_t N>
Loop<N> make_loop(const Shape& sizes, const std::array<Shape, N>& strides) {
  Loop<N> l;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !l.sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = l.strides[k].back() == strides[k][d] * sizes[d];
    if (merge) {
      l.sizes.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k) l.strides[k].back() = strides[k][d];
    } else {
      l.sizes.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k) l.strides[k].push_back(strides[k][d]);
    }
  }
  if (l.sizes.empty()) {
    l.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) l.strides[k].push_back(0);
  }
  return l;
}

/// The most elements for_each_row hands fn at once.
constexpr int64_t kRowPiece = 32768;

/// Calls fn(offsets, n, inner_strides) for every innermost row, or for pieces of it: a
/// row longer than kRowPiece elements is cut into pieces of at most that many, so a
/// contiguous tensor (one merged row) runs on several threads too. Rows and pieces run
/// in parallel when the loop is large. Offsets are element offsets per operand; fn must
/// treat each element on its own (elementwise kernels).
template <size_t N, typename Fn>
void for_each_row(const Loop<N>& l, Fn&& fn) {
  int64_t nd = static_cast<int64_t>(l.sizes.size());
  int64_t inner = l.sizes[nd - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d < nd - 1; ++d) rows *= l.sizes[d];
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) inner_st[k] = l.strides[k][nd - 1];
  const int64_t pieces = (inner + kRowPiece - 1) / kRowPiece;
  const int64_t piece = pieces > 1 ? (inner + pieces - 1) / pieces : inner;
  parallel_for(rows * std::max<int64_t>(pieces, 1), grain_for(piece), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = pieces > 1 ? t / pieces : t;
      const int64_t j0 = pieces > 1 ? (t % pieces) * piece : 0;
      std::array<int64_t, N> off{};
      int64_t rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rem % l.sizes[d];
        rem /= l.sizes[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * l.strides[k][d];
      }
      for (size_t k = 0; k < N; ++k) off[k] += j0 * inner_st[k];
      fn(off, std::min(piece, inner - j0), inner_st);
    }
  });
}

}  // namespace zt::cpu
