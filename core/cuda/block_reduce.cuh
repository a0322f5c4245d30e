// Warp and block reductions for the CUDA kernels (norms, softmax, argmax, conv bias).
// The trees are fixed (shuffle-down within a warp, then warp 0 over the per-warp
// partials), so a result depends only on the launch shape, never on timing: the same
// inputs give bitwise the same sums run after run.
#pragma once

#include <cuda_runtime.h>

namespace zt::cuda {

/// Sum over the 32 lanes of a warp; lane 0 holds the result.
template <typename A>
__device__ __forceinline__ A warp_reduce_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

/// Sum over the 32 lanes of a warp; every lane holds the same result. A butterfly: at each
/// level both lanes of a pair add the same two values (in swapped order, which IEEE
/// addition does not see), so the lanes agree bitwise.
template <typename A>
__device__ __forceinline__ A warp_all_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Max over the 32 lanes of a warp; every lane holds the result (NaNs are skipped
/// unless every value is NaN, like fmax).
template <typename A>
__device__ __forceinline__ A warp_all_max(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
/// result. `scratch` holds 32 values of shared memory; the call synchronizes the block.
template <typename A>
__device__ A block_all_sum(A v, A* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A s = lane < warps ? scratch[lane] : A(0);
    s = warp_reduce_sum(s);
    if (lane == 0) scratch[0] = s;
  }
  __syncthreads();
  return scratch[0];
}

/// For a block of (32, Y) threads (blockDim.y == Y): each column's Y lane values added in
/// lane order, y = 0 first; thread (x, 0) returns column x's sum, the others their own v.
/// Every thread of the block must call it (it synchronizes); `scratch` is Y x 32 values of
/// shared memory, free again when it returns. Parallel column sums (parameter gradients)
/// give each lane every Y-th row, so the rows' latency overlaps and the bits stay fixed.
template <typename A, int Y>
__device__ A column_lanes_sum(A v, A (&scratch)[Y][32]) {
  scratch[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0) {
#pragma unroll
    for (int y = 1; y < Y; ++y) v = v + scratch[y][threadIdx.x];
  }
  __syncthreads();
  return v;
}

/// Max over the block, as block_all_sum (fmax semantics).
template <typename A>
__device__ A block_all_max(A v, A* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_all_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A s = lane < warps ? scratch[lane] : scratch[0];
    s = warp_all_max(s);
    if (lane == 0) scratch[0] = s;
  }
  __syncthreads();
  return scratch[0];
}

}  // namespace zt::cuda
