// Module::set_checkpointing: a checkpointed block trains exactly as a plain one (dropout
// masks and BatchNorm included), its BatchNorm statistics move once per call although
// its forward runs twice, and its hooks run at both runs.
#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;

namespace {

// Conv -> BatchNorm -> silu -> dropout -> Conv.
class ConvBlock : public nn::UnaryModule {
 public:
  ConvBlock() : nn::UnaryModule("ConvBlock") {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).padding(1)));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(8)));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.2));
    conv2 = register_module("conv2",
                            std::make_shared<nn::Conv2d>(nn::Conv2dOptions(8, 3, 3).padding(1)));
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Dropout> drop;

 protected:
  Tensor forward(const Tensor& x) override { return (*conv2)((*drop)(silu((*bn)((*conv1)(x))))); }
};

// Two training steps of SGD-free forward/backward; the gradients and statistics after.
std::vector<std::vector<double>> two_steps(bool checkpointing) {
  manual_seed(1);
  ConvBlock block;
  block.set_checkpointing(checkpointing);
  std::vector<std::vector<double>> out;
  for (int step = 0; step < 2; ++step) {
    Generator g(10 + step);
    Tensor x = randn({2, 3, 6, 6}, g);
    x.set_requires_grad(true);
    Tensor y = block(x);
    sum(mul(y, y)).backward();
    out.push_back(x.grad().to_vector());
  }
  for (auto& [name, p] : block.named_parameters()) out.push_back(p.grad().to_vector());
  for (auto& [name, b] : block.named_buffers()) out.push_back(b.to(DType::f32).to_vector());
  return out;
}

}  // namespace

TEST(ModuleCheckpointing, TrainsAsThePlainModuleAndMovesBatchNormStatisticsOnce) {
  const auto plain = two_steps(false), checkpointed = two_steps(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], checkpointed[i]) << "entry " << i;
  // The last buffer is num_batches_tracked: two calls, two counts (not four).
  EXPECT_EQ(checkpointed.back(), std::vector<double>{2.0});
}

TEST(ModuleCheckpointing, HooksRunAtTheFirstRunAndAtTheRecomputation) {
  manual_seed(1);
  ConvBlock block;
  block.set_checkpointing(true);
  std::vector<std::string> seen;
  block.conv1->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) {
    seen.push_back(autograd::in_recompute() ? "recompute" : "first");
  });
  Tensor x = randn({2, 3, 6, 6});
  Tensor y = block(x);
  EXPECT_EQ(seen, std::vector<std::string>{"first"});
  EXPECT_FALSE(y.grad_fn() == nullptr);  // one node for the whole block
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<std::string>{"first", "recompute"}));
  ASSERT_TRUE(block.conv1->weight.grad().defined());  // no input needed a gradient
  {
    autograd::NoGradGuard ng;  // no graph: one plain run
    block(x);
  }
  EXPECT_EQ(seen.size(), 3u);
  block.eval();
  EXPECT_TRUE(block.checkpointing());
}

TEST(ModuleCheckpointing, AFrozenBlockRunsPlainlyAndADestroyedOneIsAnError) {
  manual_seed(1);
  auto block = std::make_shared<ConvBlock>();
  block->set_checkpointing(true);
  int calls = 0;
  block->conv1->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) { ++calls; });
  // Frozen, on data that needs no gradient: nothing to recompute, no graph at all.
  block->requires_grad_(false);
  Tensor x = randn({2, 3, 6, 6});
  EXPECT_FALSE(block->call({x})[0].requires_grad());
  EXPECT_EQ(calls, 1);
  // Trainable again: a checkpoint whose module is gone before backward says so.
  block->requires_grad_(true);
  Tensor y = (*block)(x);
  block.reset();
  EXPECT_TRUE(test::throws_with([&] { sum(y).backward(); },
                                "backward through checkpointed ConvBlock: the module was "
                                "destroyed after its forward"));
}
