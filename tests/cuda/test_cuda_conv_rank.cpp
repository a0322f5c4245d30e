// The order in which the CUDA convolution tries cuDNN's algorithms (core/cuda/conv_rank.h),
// on hand-made ranked lists as cuDNN's heuristics return them. Host logic only: it runs
// without a GPU wherever zt is built with CUDA.
#include <gtest/gtest.h>

#ifdef ZT_WITH_CUDA
#include <vector>

#include "core/cuda/conv_rank.h"
#include "core/cuda/cudnn.h"
#include "core/error.h"

using namespace zt::cuda;

namespace {

cudnnConvolutionBwdFilterAlgoPerf_t filter_perf(cudnnConvolutionBwdFilterAlgo_t algo,
                                                cudnnDeterminism_t det,
                                                cudnnMathType_t math = CUDNN_DEFAULT_MATH,
                                                size_t memory = 0,
                                                cudnnStatus_t status = CUDNN_STATUS_SUCCESS) {
  cudnnConvolutionBwdFilterAlgoPerf_t p{};
  p.algo = algo;
  p.status = status;
  p.memory = memory;
  p.determinism = det;
  p.mathType = math;
  return p;
}

std::vector<int> algos(const std::vector<ConvChoice>& choices) {
  std::vector<int> out;
  for (const ConvChoice& c : choices) out.push_back(c.algo);
  return out;
}

// A backward-filter list as cuDNN may rank it: atomics first, then FFT, then the
// deterministic GEMM, Winograd and one that failed or needs too much workspace.
std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter_list() {
  return {
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_NON_DETERMINISTIC),
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_DETERMINISTIC),
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, CUDNN_DETERMINISTIC,
                  CUDNN_TENSOR_OP_MATH),
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_DETERMINISTIC),
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_NON_DETERMINISTIC, CUDNN_DEFAULT_MATH,
                  kMaxConvWorkspace + 1),
      filter_perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, CUDNN_DETERMINISTIC,
                  CUDNN_DEFAULT_MATH, 0, CUDNN_STATUS_NOT_SUPPORTED),
  };
}

}  // namespace

TEST(CudaConvRank, ExactF32TriesSumsOfProductsBeforeTransforms) {
  auto perfs = filter_list();
  std::vector<ConvChoice> c = usable_algos(ConvPass::kBackwardFilter, perfs.data(),
                                           static_cast<int>(perfs.size()), /*exact_f32=*/true);
  // ALGO_1 (deterministic GEMM), ALGO_0 (atomics), then FFT; the tensor-core Winograd, the
  // failed FFT tiling and the over-sized ALGO_3 are not usable.
  EXPECT_EQ(algos(c), (std::vector<int>{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT}));
  for (const ConvChoice& choice : c) EXPECT_EQ(choice.math, CUDNN_FMA_MATH);
}

TEST(CudaConvRank, OtherwiseDeterministicFirstInCudnnsOrder) {
  auto perfs = filter_list();
  std::vector<ConvChoice> c = usable_algos(ConvPass::kBackwardFilter, perfs.data(),
                                           static_cast<int>(perfs.size()), /*exact_f32=*/false);
  EXPECT_EQ(algos(c), (std::vector<int>{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0}));
  EXPECT_EQ(c[1].math, CUDNN_TENSOR_OP_MATH);  // each keeps its own math type
}

// train.cudnn_deterministic: false (PyTorch's default): determinism no longer orders the
// list, so atomics compete in cuDNN's own order; exact f32 still puts sums of products first.
TEST(CudaConvRank, WithoutDeterminismFirstCudnnsOrderStands) {
  auto perfs = filter_list();
  const int n = static_cast<int>(perfs.size());
  std::vector<ConvChoice> c = usable_algos(ConvPass::kBackwardFilter, perfs.data(), n,
                                           /*exact_f32=*/false, /*deterministic_first=*/false);
  EXPECT_EQ(algos(c), (std::vector<int>{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1}));
  for (const ConvChoice& choice : c) EXPECT_EQ(choice.group, 0) << "one group: all are timed";
  c = usable_algos(ConvPass::kBackwardFilter, perfs.data(), n, /*exact_f32=*/true,
                   /*deterministic_first=*/false);
  EXPECT_EQ(algos(c), (std::vector<int>{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT}));
}

TEST(CudaConvRank, TransformingAlgorithmsOfEachPass) {
  EXPECT_TRUE(sums_products(ConvPass::kForward, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
  EXPECT_FALSE(sums_products(ConvPass::kForward, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING));
  EXPECT_FALSE(sums_products(ConvPass::kForward, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD));
  EXPECT_TRUE(sums_products(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1));
  EXPECT_FALSE(sums_products(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT));
  EXPECT_FALSE(
      sums_products(ConvPass::kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED));
  EXPECT_TRUE(sums_products(ConvPass::kBackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
  EXPECT_FALSE(sums_products(ConvPass::kBackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT));
}

// cuDNN's descriptors take int strides: a volume whose sample passes 2^31 elements is
// refused by name, where its batch stride used to wrap (2 x 16 x 256 x 1024 x 1024: a batch
// stride of 2^32 became 0, so sample 1 would read sample 0).
TEST(CudaConvRank, PackedStridesFitCudnnsIntsOrAreRefused) {
  EXPECT_EQ(packed_strides({2, 3, 4, 5}), (std::vector<int>{60, 20, 5, 1}));
  EXPECT_EQ(packed_strides({1, 2047, 1024, 1024}),
            (std::vector<int>{2047 * 1024 * 1024, 1024 * 1024, 1024, 1}));
  try {
    packed_strides({2, 16, 256, 1024, 1024});
    FAIL() << "a stride of 2^32 was accepted";
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("stride of 4294967296 elements, past cuDNN's 32-bit"),
              std::string::npos)
        << e.what();
  }
}

#else

TEST(CudaConvRank, NeedsTheCudaBuild) {
  GTEST_SKIP() << "zt was built without CUDA (-DZT_CUDA=OFF): no cuDNN headers to rank with";
}

#endif
