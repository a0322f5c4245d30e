// Activation checkpointing (autograd::checkpoint): the gradients equal those of the plain
// function bit for bit, dropout included; only the inputs are kept between forward and
// backward; the generator ends where the plain run leaves it; parameters get gradients
// when no input needs one; a backward inside the backward queues its end-of-backward
// callbacks on the outer one; a function that writes to its input is refused.
#include "common/test_util.h"

using namespace zt;

namespace {

// Two tanh layers with dropout between: y = tanh(dropout(tanh(x W1)) W2).
struct TwoLayers {
  Tensor w1 = test::rand_leaf({16, 64}, 1), w2 = test::rand_leaf({64, 16}, 2);
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = dropout(tanh(matmul(in[0], w1)), 0.25, /*training=*/true);
    return {tanh(matmul(h, w2))};
  }
};

struct Grads {
  std::vector<double> x, w1, w2;
};

// One forward and backward of `f` from generator seed `seed`, plain or checkpointed.
Grads run(const TwoLayers& f, bool checkpointed, uint64_t* offset_after = nullptr,
          uint64_t seed = 7) {
  Tensor x = test::rand_leaf({8, 16}, 3);
  manual_seed(seed);
  Tensor y = checkpointed ? autograd::checkpoint("two_layers", {x}, f)[0] : f({x})[0];
  sum(mul(y, y)).backward();
  if (offset_after) *offset_after = default_generator().offset();
  Grads g{x.grad().to_vector(), f.w1.grad().to_vector(), f.w2.grad().to_vector()};
  f.w1.set_grad(Tensor());
  f.w2.set_grad(Tensor());
  return g;
}

}  // namespace

TEST(Checkpoint, GradientsEqualThePlainFunctionDropoutIncluded) {
  const TwoLayers f;
  uint64_t plain_offset = 0, checkpointed_offset = 0;
  const Grads plain = run(f, false, &plain_offset);
  const Grads again = run(f, true, &checkpointed_offset);
  EXPECT_EQ(plain.x, again.x);
  EXPECT_EQ(plain.w1, again.w1);
  EXPECT_EQ(plain.w2, again.w2);
  // The recomputation draws the same mask and puts the generator back: the next draw
  // after a checkpointed step is the plain run's.
  EXPECT_EQ(checkpointed_offset, plain_offset);
  // Another mask gives other gradients: the equality above is the masks'.
  EXPECT_NE(run(f, false, nullptr, /*seed=*/8).w1, plain.w1);
}

TEST(Checkpoint, KeepsOnlyTheInputsUntilBackward) {
  const TwoLayers f;
  Tensor x = test::rand_leaf({256, 16}, 3);
  // Bytes held between forward and backward: what the graph saved.
  auto held = [&](bool checkpointed) {
    const int64_t before = memory_stats().total_current;
    Tensor y = checkpointed ? autograd::checkpoint("two_layers", {x}, f)[0] : f({x})[0];
    const int64_t after = memory_stats().total_current;
    Tensor loss = sum(y);
    loss.backward();
    f.w1.set_grad(Tensor());
    f.w2.set_grad(Tensor());
    x.set_grad(Tensor());
    return after - before;
  };
  const int64_t plain = held(false), checkpointed = held(true);
  const int64_t out_bytes = 256 * 16 * 8;  // y itself (f64)
  // Plain: y, tanh(x W1), its dropout mask and output, tanh(h W2) inputs: several 256x64
  // activations. Checkpointed: y and the node's throwaway scalar.
  EXPECT_GT(plain, 3 * 256 * 64 * 8);
  EXPECT_LE(checkpointed, out_bytes + 256);
}

TEST(Checkpoint, ParametersGetGradientsWhenNoInputNeedsOne) {
  const TwoLayers f;
  Tensor x = rand({4, 16}, DType::f64);  // data: no gradient wanted
  manual_seed(1);
  sum(autograd::checkpoint("two_layers", {x}, f)[0]).backward();
  ASSERT_TRUE(f.w1.grad().defined());
  const std::vector<double> checkpointed = f.w1.grad().to_vector();
  f.w1.set_grad(Tensor());
  manual_seed(1);
  sum(f({x})[0]).backward();
  EXPECT_EQ(f.w1.grad().to_vector(), checkpointed);
  EXPECT_FALSE(x.grad().defined());
}

TEST(Checkpoint, RetainGraphRecomputesAgainAndOutsideGradModeItIsThePlainCall) {
  const TwoLayers f;
  Tensor x = test::rand_leaf({4, 16}, 3);
  Tensor y = sum(autograd::checkpoint("two_layers", {x}, f)[0]);
  y.backward(Tensor(), /*retain_graph=*/true);
  const std::vector<double> once = x.grad().to_vector();
  y.backward();
  const std::vector<double> twice = x.grad().to_vector();
  ASSERT_EQ(once.size(), twice.size());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_DOUBLE_EQ(twice[i], 2 * once[i]);

  autograd::NoGradGuard ng;
  int calls = 0;
  std::vector<Tensor> out = autograd::checkpoint("count", {x}, [&](const std::vector<Tensor>& in) {
    ++calls;
    EXPECT_FALSE(autograd::in_checkpoint_forward());
    return std::vector<Tensor>{mul(in[0], 2.0)};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(out[0].requires_grad());
}

TEST(Checkpoint, FlagsTellTheFirstRunFromTheRecomputation) {
  Tensor x = test::rand_leaf({3}, 3);
  std::vector<std::pair<bool, bool>> seen;  // (in_checkpoint_forward, in_recompute)
  Tensor y = autograd::checkpoint("flags", {x}, [&](const std::vector<Tensor>& in) {
    seen.emplace_back(autograd::in_checkpoint_forward(), autograd::in_recompute());
    return std::vector<Tensor>{mul(in[0], in[0])};
  })[0];
  EXPECT_FALSE(autograd::in_checkpoint_forward());
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<std::pair<bool, bool>>{{true, false}, {false, true}}));
  EXPECT_FALSE(autograd::in_recompute());
  EXPECT_TRUE(test::values_are(
      x.grad(), {2 * x.to_vector()[0], 2 * x.to_vector()[1], 2 * x.to_vector()[2]}, 1e-6));
}

TEST(Checkpoint, CallbacksQueuedInTheInnerBackwardRunAtTheOuterEnd) {
  // The ZeRO engine queues its end-of-backward work from inside a checkpoint's
  // recomputation (the first module whose gradients arrive may be checkpointed): it must
  // run once every gradient is in, not when the inner backward ends.
  Tensor x = test::rand_leaf({3}, 3), w = test::rand_leaf({3}, 4);
  std::vector<std::string> order;
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    order.push_back("w");
    autograd::queue_callback([&] { order.push_back("end"); });
  });
  x.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("x"); });
  Tensor h = mul(x, 3.0);  // before the checkpoint: its backward comes after the inner one
  Tensor y = autograd::checkpoint("inner", {h}, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(in[0], w)};
  })[0];
  sum(y).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w", "x", "end"}));
}

TEST(Checkpoint, AFailedRecomputationLeavesTheThreadAsItWas) {
  Tensor x = test::rand_leaf({3}, 3);
  int runs = 0;
  Tensor y = autograd::checkpoint("fails", {x}, [&](const std::vector<Tensor>& in) {
    if (++runs == 2) {
      rand({5});  // moves the generator before failing
      throw Error("recomputation failed");
    }
    return std::vector<Tensor>{mul(in[0], 2.0)};
  })[0];
  const uint64_t offset = default_generator().offset();
  EXPECT_THROW(sum(y).backward(), Error);
  EXPECT_EQ(default_generator().offset(), offset);
  EXPECT_FALSE(autograd::in_recompute());
  EXPECT_FALSE(autograd::in_backward());
  EXPECT_TRUE(autograd::grad_mode_enabled());
}

TEST(Checkpoint, IntegerOutputsComeBackWithoutAGraph) {
  Tensor x = test::rand_leaf({3}, 3);
  std::vector<Tensor> out = autograd::checkpoint("ids", {x}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(in[0], 2.0), zeros({3}, DType::i64)};
  });
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  sum(out[0]).backward();
  EXPECT_TRUE(test::values_are(x.grad(), {2, 2, 2}));
}

// A function that writes to its input in place would run its write twice (once more in
// the recomputation) and be differentiated from the written value: the first run says so.
TEST(Checkpoint, AFunctionThatWritesToItsInputIsAnError) {
  Tensor w = test::rand_leaf({3, 3}, 4);
  Tensor x = test::rand_leaf({2, 3}, 5).detach();  // data: no gradient, so the write is allowed
  EXPECT_TRUE(test::throws_with(
      [&] {
        autograd::checkpoint("scales_its_input", {x}, [&](const std::vector<Tensor>& in) {
          mul_(in[0], 2.0);
          return std::vector<Tensor>{tanh(matmul(in[0], w))};
        });
      },
      "checkpoint 'scales_its_input': the function wrote to its input 0 [2, 3] in place"));
}

// An input the checkpointed function does not use gets no gradient, and the nodes behind
// it (a view, an elementwise op) are not called: no gradient reached them.
TEST(Checkpoint, AnInputTheFunctionIgnoresPassesNoGradientBack) {
  Tensor x = test::rand_leaf({3}, 1), w = test::rand_leaf({3}, 2);
  const auto out = autograd::checkpoint(
      "ignores_x", {x.view({3, 1}), mul(x, 2.0)},
      [&](const std::vector<Tensor>&) { return std::vector<Tensor>{mul(w, 3.0)}; });
  sum(out[0]).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(test::values_are(w.grad(), {3, 3, 3}));
}
