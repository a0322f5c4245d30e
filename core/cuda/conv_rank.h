// The order in which core/cuda/conv.cu tries cuDNN's convolution algorithms, apart from
// the cuDNN calls so that a test checks it without a GPU (tests/cuda/test_cuda_conv_norm.cpp).
//
// cuDNN ranks a pass's algorithms by expected speed. zt tries them in that order within
// groups: deterministic ones (bitwise reproducible, as the CPU is) before those that sum
// with atomics, and, for exact f32 (no TF32), algorithms that sum products of the inputs
// themselves (the GEMM family, direct) before FFT and Winograd, which transform whole
// planes first: their rounding error grows with the norms of the planes, not with each
// output's own terms, and exact f32 promises the accuracy of fp32 sums of products.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace zt::cuda {

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// The most workspace one convolution call may take.
constexpr size_t kMaxConvWorkspace = size_t{1} << 30;  // 1 GiB

/// One candidate algorithm of one pass, the workspace it needs and its math type.
struct ConvChoice {
  int algo;
  size_t workspace;
  cudnnMathType_t math;
  int group = 0;  // try_group's: candidates are timed against the others of their group
};

/// Whether algorithm `algo` of `pass` sums products of the untransformed inputs.
inline bool sums_products(ConvPass pass, int algo) {
  switch (pass) {
    case ConvPass::kForward:
      return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
             algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
             algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    case ConvPass::kBackwardData:
      return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case ConvPass::kBackwardFilter:
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  }
  return false;
}

/// The group an algorithm is tried in (lower first; cuDNN's order within a group). For
/// exact f32: products summed and deterministic, products summed, transformed and
/// deterministic, transformed. Otherwise: deterministic, then the rest. Without
/// `deterministic_first` (ConvAlgoPolicy::deterministic off) determinism does not count.
inline int try_group(ConvPass pass, int algo, bool deterministic, bool exact_f32,
                     bool deterministic_first = true) {
  const int by_determinism = deterministic || !deterministic_first ? 0 : 1;
  if (!exact_f32) return by_determinism;
  return (sums_products(pass, algo) ? 0 : 2) + by_determinism;
}

/// The usable entries of cuDNN's ranked list `perfs` (a cudnnConvolution*AlgoPerf_t array
/// of `pass`, in cuDNN's order): succeeded, within kMaxConvWorkspace, not a tensor-core
/// algorithm when exact f32 is wanted (those run with FMA math); ordered by try_group,
/// cuDNN's order kept within a group.
template <typename Perf>
std::vector<ConvChoice> usable_algos(ConvPass pass, const Perf* perfs, int n, bool exact_f32,
                                     bool deterministic_first = true) {
  std::vector<std::pair<int, ConvChoice>> grouped;
  for (int i = 0; i < n; ++i) {
    const Perf& p = perfs[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspace) continue;
    if (exact_f32 &&
        (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    const int algo = static_cast<int>(p.algo);
    const int group =
        try_group(pass, algo, p.determinism == CUDNN_DETERMINISTIC, exact_f32, deterministic_first);
    grouped.emplace_back(
        group, ConvChoice{algo, p.memory, exact_f32 ? CUDNN_FMA_MATH : p.mathType, group});
  }
  std::stable_sort(grouped.begin(), grouped.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ConvChoice> out;
  for (const auto& entry : grouped) out.push_back(entry.second);
  return out;
}

}  // namespace zt::cuda
