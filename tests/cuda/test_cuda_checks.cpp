// The GPU branches of ops check and count what their CPU twins do. Where an op takes a
// CUDA-only route before its kernel (conv's symmetric padding for cuDNN), a bad argument
// gets the CPU's error word for word, naming the values the caller gave. Without a GPU
// every test skips and says why.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "core/ops.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using zt::cuda_test::kCpu;
using zt::cuda_test::kGpu;

namespace {

// The error of conv2d(x (1, 1, 5, 5), w (1, 1, 3, 3)) with `a` on `dev`.
std::string conv2d_error(Device dev, const Conv2dArgs& a) {
  const Tensor x = zeros({1, 1, 5, 5}, DType::f32, dev);
  const Tensor w = zeros({1, 1, 3, 3}, DType::f32, dev);
  return test::error_of([&] { (void)conv2d(x, w, Tensor(), a); });
}

}  // namespace

// cuDNN pads symmetrically, so the GPU's conv pads an asymmetric input first. A geometry
// with no convolution went through that step before any check: a negative or too small
// padding was reported as the symmetric one it had been turned into ((-1, -1) for the
// given (-1, 0); (0, 0) for (0, 1) whose input is then shorter than the kernel), and a bad
// stride or dilation without the axis's name.
TEST(CudaChecks, ConvArgumentErrorsAreTheCpusWordForWord) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    const char* what;
    Conv2dArgs args;
    const char* expect;  // in the CPU's message
  };
  const std::vector<Case> cases = {
      {"negative front padding", {{1, 1}, {-1, 0, 0, 0}, {1, 1}, 1}, "(-1, 0)"},
      {"negative back padding", {{1, 1}, {0, 0, 0, -1}, {1, 1}, 1}, "(0, -1)"},
      {"input shorter than the kernel", {{1, 1}, {0, 1, 0, 0}, {3, 1}, 1}, "(5 + 0 + 1)"},
      {"stride 0", {{1, 0}, {1, 0, 0, 0}, {1, 1}, 1}, "stride along W"},
      {"dilation 0", {{1, 1}, {0, 1, 0, 0}, {0, 1}, 1}, "dilation along H"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string cpu = conv2d_error(kCpu, c.args);
    ASSERT_NE(cpu.find(c.expect), std::string::npos) << cpu;
    EXPECT_EQ(conv2d_error(kGpu, c.args), cpu);
  }
}
