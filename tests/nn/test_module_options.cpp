// Layer options PyTorch refuses are refused when the layer is built, naming the layer and
// the option, rather than building a layer no input can pass or failing with another
// problem's message.
#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;

// A normalized_shape with a negative size: [-1] was refused as "empty", and [-2, -3]
// without affine parameters was built (numel 6) and failed every forward instead.
TEST(ModuleOptions, NormalizedShapeSizesMustBePositive) {
  for (const Shape& bad : {Shape{-1}, Shape{-2, -3}, Shape{4, 0}}) {
    const std::string shape = shape_str(bad);
    for (bool affine : {true, false}) {
      EXPECT_TRUE(test::throws_with(
          [&] { nn::LayerNorm(nn::LayerNormOptions(bad).elementwise_affine(affine)); },
          "LayerNorm: normalized_shape must be non-empty with positive sizes, got " + shape));
      EXPECT_TRUE(test::throws_with(
          [&] { nn::RMSNorm(nn::RMSNormOptions(bad).elementwise_affine(affine)); },
          "RMSNorm: normalized_shape must be non-empty with positive sizes, got " + shape));
    }
  }
  EXPECT_TRUE(test::throws_with([] { nn::LayerNorm(nn::LayerNormOptions(Shape{})); },
                                "normalized_shape must be non-empty with positive sizes, got []"));
}
