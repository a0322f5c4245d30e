// A block's pass over rows of one length, 16 bytes a load. One 2-byte load a thread at a
// time leaves too few bytes in flight to keep the memory busy (the wide rows of the loss
// and norm kernels ran at a fifth of the bandwidth); here each thread loads 16-byte chunks
// (8 bf16 or f16, 4 f32, 2 f64). A row splits into a scalar head (the elements before its
// first 16-byte boundary), the chunks, and a scalar tail. Rows read or written together
// must lie alike against 16-byte boundaries, else the pass runs element by element.
// Thread threadIdx.x takes head elements threadIdx.x, + blockDim.x, ..., then chunks
// threadIdx.x, + blockDim.x, ..., then tail elements likewise (a warp's lanes, for rows a
// warp owns): a fixed split, so sums built in it have the same bits every run.
#pragma once

#include <cstdint>
#include <utility>

#include "core/cuda/device_types.cuh"

namespace zt::cuda {

/// How rows of n elements of T starting at `row` (and rows lying alike) split.
template <typename T>
struct RowChunks {
  static constexpr int kVec = 16 / sizeof(T);
  int64_t head, chunks;
  /// The split of `row`; all scalar (head = n) unless each of `also` lies as `row` does.
  template <typename... U>
  __device__ RowChunks(int64_t n, const T* row, const U*... also) {
    const auto mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16);
    const bool alike =
        ((static_cast<int64_t>(reinterpret_cast<uintptr_t>(also) % 16) == mis) && ...);
    head = !alike || mis % static_cast<int64_t>(sizeof(T)) != 0
               ? n
               : ((16 - mis) % 16) / static_cast<int64_t>(sizeof(T));
    if (head > n) head = n;
    chunks = (n - head) / kVec;
  }
  __device__ int64_t tail() const { return head + chunks * kVec; }
};

/// The threads that share a row: each takes element (or chunk) first, first + step, ...
struct RowThreads {
  int first, step;
  /// The whole block (threadIdx.x of blockDim.x).
  static __device__ RowThreads block() {
    return {static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
  }
  /// The calling thread's warp (its lane of 32).
  static __device__ RowThreads warp() { return {static_cast<int>(threadIdx.x % 32), 32}; }
};

namespace detail {

/// The walk of row_for_each (kMap false: f(c, v)) and row_map (out[c] = f(c, v)).
template <bool kMap, typename A, int K, typename T, typename F>
__device__ __forceinline__ void row_walk(const T* const (&in)[K], T* out, int64_t n, F&& f,
                                         RowThreads t) {
  constexpr int kVec = RowChunks<T>::kVec;
  const RowChunks<T> rc = [&]<int... I>(std::integer_sequence<int, I...>) {
    if constexpr (kMap)
      return RowChunks<T>(n, out, in[I]...);
    else
      return RowChunks<T>(n, in[I]...);
  }
  (std::make_integer_sequence<int, K>());
  // Element c from values v: its result stored (kMap) or only f called.
  auto apply = [&](int64_t c, const A(&v)[K], T& slot) {
    if constexpr (kMap)
      slot = f(c, v);
    else
      f(c, v);
  };
  auto one = [&](int64_t c) {
    A v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = convert<A>(in[k][c]);
    T unused;
    apply(c, v, kMap ? out[c] : unused);
  };
  for (int64_t c = t.first; c < rc.head; c += t.step) one(c);
#pragma unroll 2
  for (int64_t i = t.first; i < rc.chunks; i += t.step) {
    uint4 raw[K], res;
#pragma unroll
    for (int k = 0; k < K; ++k) raw[k] = reinterpret_cast<const uint4*>(in[k] + rc.head)[i];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      A v[K];
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] = convert<A>(reinterpret_cast<const T*>(&raw[k])[e]);
      apply(rc.head + i * kVec + e, v, reinterpret_cast<T*>(&res)[e]);
    }
    if constexpr (kMap) reinterpret_cast<uint4*>(out + rc.head)[i] = res;
  }
  for (int64_t c = rc.tail() + t.first; c < n; c += t.step) one(c);
}

}  // namespace detail

/// f(c, v) for each element c of the K rows in[] (v[k] = in[k][c] as A), the block's
/// threads (or a warp's lanes, RowThreads::warp()) each taking their share. K >= 1 rows
/// that lie alike.
template <typename A, int K, typename T, typename F>
__device__ __forceinline__ void row_for_each(const T* const (&in)[K], int64_t n, F&& f,
                                             RowThreads t = RowThreads::block()) {
  detail::row_walk<false, A>(in, static_cast<T*>(nullptr), n, f, t);
}

/// f(v, count) over one row's values as A in runs, the threads of t taking their shares as
/// row_for_each does: each scalar head and tail element alone (count 1), each 16-byte chunk
/// as one run (count kVec). For reductions that do per-run work (a running max moved once
/// a chunk).
template <typename A, typename T, typename F>
__device__ __forceinline__ void row_for_each_run(const T* row, int64_t n, F&& f,
                                                 RowThreads t = RowThreads::block()) {
  constexpr int kVec = RowChunks<T>::kVec;
  const RowChunks<T> rc(n, row);
  auto one = [&](int64_t c) {
    const A v = convert<A>(row[c]);
    f(&v, 1);
  };
  for (int64_t c = t.first; c < rc.head; c += t.step) one(c);
#pragma unroll 2
  for (int64_t i = t.first; i < rc.chunks; i += t.step) {
    const uint4 raw = reinterpret_cast<const uint4*>(row + rc.head)[i];
    A v[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = convert<A>(reinterpret_cast<const T*>(&raw)[e]);
    f(v, kVec);
  }
  for (int64_t c = rc.tail() + t.first; c < n; c += t.step) one(c);
}

/// out[c] = f(c, v) (a T) for each element c of the K rows in[], as row_for_each; out
/// written 16 bytes a store where it lies as the inputs do.
template <typename A, int K, typename T, typename F>
__device__ __forceinline__ void row_map(const T* const (&in)[K], T* out, int64_t n, F&& f,
                                        RowThreads t = RowThreads::block()) {
  detail::row_walk<true, A>(in, out, n, f, t);
}

}  // namespace zt::cuda
