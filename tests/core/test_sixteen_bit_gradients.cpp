// Results and gradients of 16-bit tensors where the exact ones are in range: the sums,
// counts and products that would leave the 16-bit range (or stop growing in it) on the
// way are taken in f32 and rounded once. Each case overflows, or under-counts, when
// computed in the 16-bit type throughout.
#include <cmath>
#include <vector>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

// An embedding row picked 4096 times: its gradient is 4096 times the output's (adding
// ones, bf16 stops at 256 and f16 at 2048). A gather's gradient adds the same way.
TEST(SixteenBitGradients, RowsPickedOftenSumInF32) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor w = zeros({3, 2}, dt).set_requires_grad(true);
    sum(embedding(w, zeros({4096}, DType::i64))).backward();
    EXPECT_EQ(w.grad().dtype(), dt);
    EXPECT_TRUE(values_are(w.grad(), {4096, 4096, 0, 0, 0, 0})) << dtype_name(dt);
    Tensor x = zeros({2}, dt).set_requires_grad(true);
    sum(gather(x, 0, zeros({4096}, DType::i64))).backward();
    EXPECT_TRUE(values_are(x.grad(), {4096, 0})) << dtype_name(dt);
  }
}

// f16 heads of 40s over 64 dims: q.k = 102400, past f16's 65504. The scale applies in
// the GEMM, before its result is rounded, so the output is v's value, not NaN. In the
// backward a loss-scaled gradient times v (64 x 1024 x 1.5 = 98304) is formed in f32;
// with equal scores the gradient of q is 0.
TEST(SixteenBitGradients, F16AttentionScoresAndTheirGradientsStayInRange) {
  Tensor q = full({1, 1, 2, 64}, 40.0, DType::f16).set_requires_grad(true);
  const Tensor k = full({1, 1, 2, 64}, 40.0, DType::f16);
  const Tensor v = full({1, 1, 2, 64}, 1.5, DType::f16);
  const Tensor out = scaled_dot_product_attention(q, k, v, false);
  EXPECT_TRUE(values_are(out, std::vector<double>(128, 1.5)));
  sum(mul(out, full({1, 1, 2, 64}, 1024.0, DType::f16))).backward();
  EXPECT_TRUE(values_are(q.grad(), std::vector<double>(128, 0.0)));
}

// The divisor's gradient -g a / b^2 = -g o / b: for a = 10000, b = 100, g = 1000 it is
// -1000, though g o = 100000 is past f16's range.
TEST(SixteenBitGradients, DivisorGradientFormsItsProductInF32) {
  const Tensor a = full({1}, 10000.0, DType::f16);
  Tensor b = full({1}, 100.0, DType::f16).set_requires_grad(true);
  sum(mul(div(a, b), full({1}, 1000.0, DType::f16))).backward();
  EXPECT_TRUE(values_are(b.grad(), {-1000}));
}

// max over all elements spreads its gradient evenly over the ties: 65520 of them, a count
// f16 cannot hold, share a gradient of 1.
TEST(SixteenBitGradients, TiesOfAMaxAreCountedInF32) {
  Tensor x = ones({65520}, DType::f16).set_requires_grad(true);
  max(x).backward();
  EXPECT_NEAR(sum(x.grad().to(DType::f64)).item(), 1.0, 0.01);
}
