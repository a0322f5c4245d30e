// kl_div on an empty batch. PyTorch's batchmean divides the sum, 0, by the batch size, 0,
// and returns NaN without a word, as its mean over no element does; zt refuses both with
// an error that names the shape and says what to use instead. Sum and none are defined on
// an empty batch and match PyTorch: 0 and an empty tensor.
#include <string>

#include "common/test_util.h"
#include "nn/loss.h"

using namespace zt;

TEST(KLDivEmptyBatch, BatchmeanOnNoRowsIsAnErrorNotNaN) {
  const Tensor logp = zeros({0, 3}, DType::f64), target = zeros({0, 3}, DType::f64);
  for (bool log_target : {false, true}) {
    SCOPED_TRACE(log_target ? "log_target" : "probabilities");
    const KLDivLossOptions batchmean{.reduction = Reduction::kBatchMean, .log_target = log_target};
    EXPECT_TRUE(
        test::throws_with([&] { kl_div(logp, target, batchmean); },
                          "kl_div: batchmean needs a batch (dim 0) of at least one, got [0, 3]"));
    nn::KLDivLoss module(batchmean);
    EXPECT_TRUE(test::throws_with([&] { module(logp, target); },
                                  "kl_div: batchmean needs a batch (dim 0) of at least one, got "
                                  "[0, 3]"));
    EXPECT_TRUE(test::throws_with(
        [&] { kl_div(logp, target, {.reduction = Reduction::kMean, .log_target = log_target}); },
        "kl_div: mean over an empty input [0, 3] (use reduction sum or none)"));
    const Tensor s = kl_div(logp, target, {.reduction = Reduction::kSum, .log_target = log_target});
    EXPECT_EQ(s.dim(), 0);
    EXPECT_EQ(s.item(), 0.0);
    const Tensor n =
        kl_div(logp, target, {.reduction = Reduction::kNone, .log_target = log_target});
    EXPECT_EQ(n.sizes(), (Shape{0, 3}));
  }
}
