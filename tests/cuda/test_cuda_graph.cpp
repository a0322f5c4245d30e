// CUDA graphs (label cuda; skip without a GPU): a training step captured once and
// replayed (core/step_graph.h) gives the eager steps' numbers, with plain AdamW and
// through a one-rank ZeRO-3 engine (also with checkpointed modules, recomputed inside the
// captured backward), across learning-rate changes (each step's lr is 1 /
// (1 + k) of the first, so a replay that kept the captured constants would be off by far
// more than the 1e-6 allowed: the kernels are the same, but cuBLAS does not promise the
// same bits on two streams) and new batches copied into the step's input; a replay is one launch
// and no host wait; what a graph cannot replay (a host read, a random draw) is a clear error at
// capture; and memory a captured kernel read is not handed out again while the graph lives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/step_graph.h"
#include "core/work_counts.h"
#include "cuda/cuda_compare.h"
#include "nn/nn.h"
#include "zero/zero.h"

#ifdef ZT_WITH_CUDA
#include "core/cuda/graph.h"
#endif

using namespace zt;
using zt::cuda_test::kGpu;
using zt::cuda_test::normal_cpu;
using zt::test::throws_with;

namespace {

class Mlp : public nn::UnaryModule {
 public:
  Mlp() : nn::UnaryModule("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(16, 64));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({64})));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 8));
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> ln;

 protected:
  Tensor forward(const Tensor& x) override { return (*fc2)(gelu((*ln)((*fc1)(x)))); }
};

[[maybe_unused]] bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return x.numel() == y.numel() && x.dtype() == y.dtype() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * dtype_size(x.dtype())) == 0;
}

// One plain step: zero the gradients, forward, mean squared error, backward, update.
StepGraph::Step plain_step(Mlp& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  return [&model, &opt, x, y] {
    opt.zero_grad();
    Tensor loss = mse_loss(model(x), y);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
}

// A training run: its losses and final parameters (on the CPU).
struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;
};

// Six steps on batch k (x and y drawn from seeds seed + k and seed + 100 + k) at learning
// rate 1e-2 / (1 + k): eager when `graphed` is false, else through a StepGraph (two
// warm-up steps, the capture, replays). Returns the losses.
std::vector<double> six_steps(bool graphed, const Tensor& x, const Tensor& y, uint64_t seed,
                              const std::function<void(double)>& set_lr,
                              const StepGraph::Step& step,
                              const std::function<void()>& before_replay) {
  std::unique_ptr<StepGraph> graph;
  if (graphed) graph = std::make_unique<StepGraph>(kGpu);
  std::vector<double> losses;
  for (int k = 0; k < 6; ++k) {
    x.copy_(normal_cpu(x.sizes(), seed + k));
    y.copy_(normal_cpu(y.sizes(), seed + 100 + k));
    set_lr(1e-2 / (1 + k));
    Tensor loss = graph ? graph->run(step, before_replay)[0] : step()[0];
    losses.push_back(loss.item());
  }
  if (graph) {
    EXPECT_TRUE(graph->captured());
  }
  return losses;
}

// The graphed run follows the eager one: losses to 1e-6 relative, parameters to 1e-6 / 1e-7.
void expect_same_run(const Run& eager, const Run& graphed) {
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (size_t k = 0; k < eager.losses.size(); ++k)
    EXPECT_NEAR(graphed.losses[k], eager.losses[k], 1e-6 * std::abs(eager.losses[k]))
        << "step " << k;
  ASSERT_EQ(eager.params.size(), graphed.params.size());
  for (size_t i = 0; i < eager.params.size(); ++i)
    EXPECT_CLOSE(graphed.params[i], eager.params[i], 1e-6, 1e-7) << "parameter " << i;
}

// AdamW on the module, plain.
Run train_plain(bool graphed) {
  manual_seed(41);
  Mlp model;
  model.to(kGpu);
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-2));
  opt.set_capturable(true);
  Tensor x = Tensor::empty({32, 16}, DType::f32, kGpu),
         y = Tensor::empty({32, 8}, DType::f32, kGpu);
  Run run;
  run.losses = six_steps(
      graphed, x, y, 100, [&](double lr) { opt.set_lr(lr); }, plain_step(model, opt, x, y),
      [&] { opt.before_replay(); });
  EXPECT_EQ(opt.step_count(), 6);
  for (auto& [name, p] : model.named_parameters()) run.params.push_back(p.to(Device::cpu()));
  return run;
}

// AdamW on the fp32 master shards of a one-rank ZeRO-3 engine, with clipping; with
// `recompute`, fc1 and ln are checkpointed (recomputed in backward, inside the capture).
Run train_engine(bool graphed, bool recompute = false) {
  Run run;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    manual_seed(43);
    auto model = std::make_shared<Mlp>();
    model->to(kGpu);
    model->fc1->set_checkpointing(recompute);
    model->ln->set_checkpointing(recompute);
    zero::Config cfg;
    cfg.gradient_clipping = 0.5;
    zero::Engine engine(model, comm, cfg, {.type = "adamw", .lr = 1e-2, .weight_decay = 0.01});
    engine.set_capturable(true);
    ASSERT_EQ(engine.capture_blocker(), "");
    Tensor x = Tensor::empty({32, 16}, DType::f32, kGpu);
    Tensor y = Tensor::empty({32, 8}, DType::f32, kGpu);
    auto step = [&] {
      Tensor loss = mse_loss(engine(x), y);
      engine.backward(loss);
      engine.step();
      return std::vector<Tensor>{loss};
    };
    run.losses = six_steps(
        graphed, x, y, 300, [&](double lr) { engine.set_lr(lr); }, step,
        [&] { engine.before_replay(); });
    EXPECT_EQ(engine.global_step(), 6);
    for (const auto& np : engine.partitioned())
      run.params.push_back(zero::zero_param(np.param)->fp32_shard().to(Device::cpu()));
  });
  return run;
}

}  // namespace

TEST(CudaGraph, ReplayedAdamWStepsEqualEagerSteps) {
  ZT_SKIP_WITHOUT_GPU();
  expect_same_run(train_plain(false), train_plain(true));
}

TEST(CudaGraph, ReplayedEngineStepsEqualEagerSteps) {
  ZT_SKIP_WITHOUT_GPU();
  expect_same_run(train_engine(false), train_engine(true));
}

TEST(CudaGraph, ReplayedCheckpointedEngineStepsEqualEagerSteps) {
  ZT_SKIP_WITHOUT_GPU();
  expect_same_run(train_engine(false, true), train_engine(true, true));
}

// A replay is an optimizer step: it counts as a write of each parameter it updates, so a
// backward through a forward recorded before the replay is refused, as after an eager step.
// (The capture counted its writes once; the replays wrote the parameters without a count,
// and such a backward paired the old activations with the new weights without a word.)
TEST(CudaGraph, AForwardFromBeforeAReplayCannotBackwardAfterIt) {
  ZT_SKIP_WITHOUT_GPU();
  manual_seed(45);
  Mlp model;
  model.to(kGpu);
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-3));
  opt.set_capturable(true);
  const Tensor x = normal_cpu({32, 16}, 3).to(kGpu), y = normal_cpu({32, 8}, 4).to(kGpu);
  const StepGraph::Step step = plain_step(model, opt, x, y);
  auto before = [&] { opt.before_replay(); };
  StepGraph graph(kGpu);
  for (int k = 0; k < 3; ++k) graph.run(step, before);  // two warm-up steps, the capture
  ASSERT_TRUE(graph.captured());
  const Tensor held = mse_loss(model(x), y);  // eager, outside the graph
  graph.run(step, before);                    // a replay: new weights
  EXPECT_TRUE(throws_with([&] { held.backward(); }, "was written in place since the forward"));
}

// A replay is an engine step: a parameter frozen (or one registered) since the engine was
// built is refused before the replay, as step() refuses it; the replays went on training a
// frozen parameter without a word.
TEST(CudaGraph, AReplayRefusesAParameterFrozenSinceTheEngineWasBuilt) {
  ZT_SKIP_WITHOUT_GPU();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    manual_seed(46);
    auto model = std::make_shared<Mlp>();
    model->to(kGpu);
    zero::Engine engine(model, comm, {}, {.type = "adamw", .lr = 1e-3});
    engine.set_capturable(true);
    const Tensor x = normal_cpu({32, 16}, 5).to(kGpu), y = normal_cpu({32, 8}, 6).to(kGpu);
    auto step = [&] {
      Tensor loss = mse_loss(engine(x), y);
      engine.backward(loss);
      engine.step();
      return std::vector<Tensor>{loss};
    };
    auto before = [&] { engine.before_replay(); };
    StepGraph graph(kGpu);
    for (int k = 0; k < 3; ++k) graph.run(step, before);  // two warm-up steps, the capture
    ASSERT_TRUE(graph.captured());
    model->fc1->weight.set_requires_grad(false);
    EXPECT_TRUE(throws_with([&] { graph.run(step, before); },
                            "'fc1.weight' was trainable when the engine was built"));
    EXPECT_EQ(engine.global_step(), 3) << "the refused replay is not counted";
  });
}

TEST(CudaGraph, AReplayIsOneLaunchAndNoHostWait) {
  ZT_SKIP_WITHOUT_GPU();
  manual_seed(44);
  Mlp model;
  model.to(kGpu);
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-3));
  opt.set_capturable(true);
  Tensor x = normal_cpu({32, 16}, 1).to(kGpu), y = normal_cpu({32, 8}, 2).to(kGpu);
  const StepGraph::Step step = plain_step(model, opt, x, y);
  auto before = [&] { opt.before_replay(); };
  StepGraph graph(kGpu);
  for (int k = 0; k < 3; ++k) graph.run(step, before);  // two warm-up steps, the capture
  const WorkCounts w0 = work_counts();
  graph.run(step, before);
  const WorkCounts w = work_counts() - w0;
  EXPECT_EQ(w.syncs, 0);
  EXPECT_EQ(w.d2h_copies + w.h2d_copies, 0);
  EXPECT_EQ(w.host_reads, 0);
  // The graph launch, and the fills that write the optimizer's step constants.
  EXPECT_LE(w.launches, 1 + 4);
  EXPECT_GT(graph.nodes(), 10u);
  // The graph holds the optimizer state's addresses and the parameters' settings: loading
  // new state and changing a learning-rate scale are refused.
  EXPECT_TRUE(
      throws_with([&] { opt.load_state_dict(opt.state_dict()); }, "captured in a CUDA graph"));
  const std::string first = opt.params().front().first;
  EXPECT_TRUE(throws_with([&] { opt.set_settings({first}, {.lr_scale = 0.5}); },
                          "captured in a CUDA graph"));
}

TEST(CudaGraph, WhatAGraphCannotReplayIsAClearError) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor x = normal_cpu({8}, 3).to(kGpu);
  const double before = sum(x).item();
  {
    StepGraph graph(kGpu, 1);
    auto reads = [&] {
      Tensor s = sum(x);
      (void)s.item();
      return std::vector<Tensor>{s};
    };
    graph.run(reads, [] {});  // eager warm-up: fine
    EXPECT_TRUE(throws_with([&] { graph.run(reads, [] {}); }, "a read back to the host"));
    EXPECT_FALSE(graph.captured());
  }
  {
    StepGraph graph(kGpu, 1);
    auto draws = [&] { return std::vector<Tensor>{add(x, rand({8}, DType::f32, kGpu))}; };
    graph.run(draws, [] {});
    EXPECT_TRUE(throws_with([&] { graph.run(draws, [] {}); }, "a random draw"));
  }
  {
    // A parameter whose first gradient arrives in the captured step: the zero fill of its
    // new Adam state would be in the graph, and every replay would start that state over.
    Tensor a = normal_cpu({8}, 4).to(kGpu), b = normal_cpu({8}, 6).to(kGpu);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    optim::Adam opt({{"a", a}, {"b", b}}, optim::AdamOptions(1e-2));
    opt.set_capturable(true);
    bool with_b = false;
    auto step = [&] {
      a.set_grad(ones({8}, DType::f32, kGpu));
      if (with_b) b.set_grad(ones({8}, DType::f32, kGpu));
      opt.step();
      return std::vector<Tensor>{};
    };
    StepGraph graph(kGpu, 1);
    graph.run(step, [&] { opt.before_replay(); });  // the warm-up: a alone
    with_b = true;
    EXPECT_TRUE(throws_with([&] { graph.run(step, [&] { opt.before_replay(); }); },
                            "the captured step creates the 'exp_avg' state of a parameter"));
  }
  // Eager work goes on as before after a failed capture.
  EXPECT_EQ(sum(x).item(), before);
}

#ifdef ZT_WITH_CUDA
TEST(CudaGraph, MemoryACapturedKernelReadsIsNotReusedWhileTheGraphLives) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor values = normal_cpu({1 << 16}, 5);
  Tensor out;
  cuda::Graph graph(0);
  {
    Tensor a = values.to(kGpu);  // allocated before the capture, dropped inside it
    graph.capture([&] {
      out = mul(a, 2.0);
      a = Tensor();
    });
  }
  // A same-sized eager tensor must not get a's block: the replay reads a's values.
  Tensor b = full({1 << 16}, 7.0, DType::f32, kGpu);
  graph.replay();
  EXPECT_TRUE(same_bits(out, mul(values, 2.0)));
  EXPECT_TRUE(same_bits(b, full({1 << 16}, 7.0)));
}
#endif

#ifdef ZT_WITH_CUDA
// The same for a block of the graph's own stream made before the capture (as a warm-up
// step makes its tensors): dropped inside the capture, it is not handed to the capture's
// next allocation, whose fill each replay would run after the product had read it, so
// that the second replay would read 7s.
TEST(CudaGraph, MemoryOfTheGraphsStreamFromBeforeTheCaptureIsNotReusedInIt) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor values = normal_cpu({1 << 16}, 5);
  Tensor out, filled;
  cuda::Graph graph(0);
  {
    Tensor a;
    {
      cuda::StreamGuard on(graph.stream());
      a = values.to(kGpu);
    }
    graph.capture([&] {
      out = mul(a, 2.0);
      a = Tensor();
      filled = full({1 << 16}, 7.0, DType::f32, kGpu);  // a's size: its free block would fit
    });
  }
  graph.replay();
  graph.replay();
  EXPECT_TRUE(same_bits(out, mul(values, 2.0)));
  EXPECT_TRUE(same_bits(filled, full({1 << 16}, 7.0)));
}
#endif

#ifdef ZT_WITH_CUDA
// A captured GEMM runs on its stream's cuBLAS workspace even when the handle served
// another stream between the warm-up and the capture (binding a stream drops the handle's
// workspace): the capture holds the same nodes, without an allocation of cuBLAS's own,
// and the replay gives the warm-up's bits.
TEST(CudaGraph, CapturedGemmsUseTheStreamsWorkspaceWhateverRanBefore) {
  ZT_SKIP_WITHOUT_GPU();
  // A long inner dimension, for which cuBLAS may choose a split-K kernel and a workspace.
  const Tensor a = normal_cpu({64, 8192}, 1).to(kGpu), b = normal_cpu({8192, 64}, 2).to(kGpu);
  auto nodes_of_capture = [&](bool gemm_between) {
    cuda::Graph graph(0);
    Tensor warm, out;
    {
      cuda::StreamGuard on(graph.stream());
      warm = matmul(a, b);  // the warm-up on the graph's stream makes its workspace
    }
    if (gemm_between) (void)matmul(a, b);  // binds the handle to the current stream
    graph.capture([&] { out = matmul(a, b); });
    graph.replay();
    EXPECT_TRUE(same_bits(out, warm.to(Device::cpu()))) << "a GEMM between: " << gemm_between;
    return graph.nodes();
  };
  const size_t direct = nodes_of_capture(false);
  EXPECT_EQ(nodes_of_capture(true), direct);
}
#endif
