// Lesson 22 — the step stays on the device.
// Invariant: a training step (backward, reduce-scatter, global norm, clipping, AdamW)
// reads nothing back to the host, the first step included (except with fp16 loss
// scaling, which reads the norm to decide whether to skip: lesson 14): the norm and the
// clip coefficient are one-element tensors on the parameters' device, so on a GPU the
// host queues the whole step without waiting. Only logging reads the norm. The gradient
// shards are views of one flat buffer per device, so the kernels a step runs do not grow
// with the number of parameters: one kernel each over the gradients for the norm and the
// clipping, one fused AdamW update, and a few one-element operations. Nothing clears the
// gradients: the step marks each shard stale (ZeroParam::grad_written), and the next
// window's first gradient of it is copied over the old values instead of added to zeros,
// which saves a pass that writes the whole buffer and another that reads it.
#include <tuple>

#include "core/work_counts.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::adamw;

namespace {

// One engine on `comm` over the Mixed model with clipping active.
std::unique_ptr<zero::Engine> make_engine(comm::Communicator& comm,
                                          std::shared_ptr<lesson::Mixed>& m) {
  manual_seed(22);
  m = lesson::partitioned<lesson::Mixed>(comm);
  zero::Config cfg;
  cfg.gradient_clipping = 0.05;
  cfg.reduce_bucket_size = 300;
  cfg.stage3_param_persistence_threshold = 10;
  return std::make_unique<zero::Engine>(m, comm, cfg, adamw());
}

}  // namespace

TEST(Lesson22StepOnDevice, ASteadyStepReadsNothingBack) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m;
    auto engine = make_engine(comm, m);
    // Step 0 too: recording the trace and creating Adam's moments read nothing back.
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = lesson::batch(8, step);
      Tensor loss = mse_loss((*engine)(lesson::rank_slice(x, comm)), lesson::rank_slice(y, comm));
      const WorkCounts before = work_counts();
      engine->backward(loss);
      engine->step();
      const WorkCounts w = work_counts() - before;
      EXPECT_EQ(w.host_reads, 0) << "step " << step << " on rank " << comm.rank()
                                 << " read a tensor back to the host";
      // Logging is what reads: the counter sees it.
      EXPECT_GT(engine->last_grad_norm(), 0.05) << "clipping was active";
      EXPECT_EQ((work_counts() - before).host_reads, 1) << "reading the norm is one host read";
    }
  });
}

TEST(Lesson22StepOnDevice, GradientShardsAreViewsOfOneBufferOverwrittenEachWindow) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m;
    auto engine = make_engine(comm, m);
    const auto& params = engine->partitioned();
    ASSERT_GT(params.size(), 3u);
    const float* base = nullptr;
    int64_t end = 0;  // elements of the buffer the shards so far cover, gaps included
    for (const auto& np : params) {
      const Tensor& g = zero::zero_param(np.param)->grad_shard;
      ASSERT_TRUE(g.defined()) << np.name;
      if (!base) base = g.data<float>();
      const int64_t offset = g.data<float>() - base;
      EXPECT_GE(offset, end) << np.name << " overlaps the shard before it";
      EXPECT_LT(offset, end + 16) << np.name << " is not the next 16-element slot";
      EXPECT_EQ(offset % 16, 0) << np.name;
      end = offset + g.numel();
    }
    auto [x, y] = lesson::batch(8, 0);
    engine->backward(mse_loss((*engine)(lesson::rank_slice(x, comm)), lesson::rank_slice(y, comm)));
    double total = 0;
    for (const auto& np : params) total += sum(abs(zero::zero_param(np.param)->grad_shard)).item();
    EXPECT_GT(total, 0.0) << "backward filled the shards";
    engine->step();
    for (const auto& np : params) EXPECT_FALSE(zero::zero_param(np.param)->grad_written) << np.name;
    // The next window's shards hold its gradients alone, not added to the last window's
    // values, which the step left in place: the same bits as the window run again after
    // discard_gradients(), which marks the shards stale too.
    // Tied, not a structured binding: clang 14 lets no lambda capture a binding.
    Tensor x1, y1;
    std::tie(x1, y1) = lesson::batch(8, 1);
    auto next_window = [&] {
      engine->backward(
          mse_loss((*engine)(lesson::rank_slice(x1, comm)), lesson::rank_slice(y1, comm)));
      engine->reduce_gradients();
      std::vector<Tensor> shards;
      for (const auto& np : params)
        shards.push_back(zero::zero_param(np.param)->grad_shard.clone());
      return shards;
    };
    const std::vector<Tensor> first = next_window();
    engine->discard_gradients();
    const std::vector<Tensor> again = next_window();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(test::all_close(first[i], again[i], 0.0, 0.0)) << params[i].name;
  });
}

namespace {
// The kernel calls of one step() (after backward) of a TanhStack of `depth` layers at 2
// ranks, with clipping active; rank 0's. The one-element arithmetic of the norm and the
// clip coefficient is there too, the same for any model.
lesson::KernelCalls step_kernels(int depth) {
  lesson::KernelCalls calls;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(22);
    auto m = lesson::partitioned<lesson::TanhStack>(comm, depth, 8);
    zero::Config cfg = lesson::eager_release_config();
    cfg.gradient_clipping = 1e-3;
    cfg.overlap_comm = false;  // every bucket is added in backward, none left for step()
    zero::Engine engine(m, comm, cfg, adamw());
    for (int step = 0; step < 2; ++step) {  // step 0 creates Adam's moments
      Generator g(step);
      engine.backward(sum(engine(randn({4, 8}, g))));
      KernelProfile profile;
      engine.step();
      if (comm.rank() == 0) calls = lesson::kernel_calls(profile);
    }
    EXPECT_GT(engine.last_grad_norm(), 1e-3) << "clipping was active";
  });
  return calls;
}
}  // namespace

TEST(Lesson22StepOnDevice, NormAndClippingAreOneKernelEachAndNothingClearsTheGradients) {
  const lesson::KernelCalls few = step_kernels(2), many = step_kernels(8);
  EXPECT_EQ(few, many) << "4 or 16 parameters: the same kernel calls";
  // Every kernel of the step on the CPU, by what it does (Engine::update, optim/clip.cpp).
  // Over the gradients, one each: sum_squares (the norm) and a binary mul_ (clipping); no
  // fill clears them. The rest works on one-element tensors.
  const lesson::KernelCalls want = {
      {"sum_squares", 1},  // norm: the squares of the flat gradient buffer, summed
      {"fill", 4},         // one-element tensors: the flat buffer's partial sum (which
                           // the CPU sums to a number; without replicas, as here, there is
                           // no second one to add), max_norm, and 1.0 twice in the clip
                           // coefficient
      {"unary", 2},        // sqrt of the norm; norm + 1e-6
      {"binary", 3},       // max_norm / (norm + 1e-6); c < 1; and clipping: the flat
                           // gradient buffer times the coefficient
      {"where", 1},        // the coefficient: c where c < 1, else 1
      {"copy", 1},         // the coefficient from f64 to the gradients' f32
      {"adam_update", 1},  // AdamW: one fused update of every shard
  };
  EXPECT_EQ(few, want);
}

// A step that never waits for the host can be captured once as a CUDA graph and replayed
// (core/step_graph.h, tests/cuda/test_cuda_graph.cpp). What keeps a step on the host is
// named before any capture: several ranks (their collective waits), gradient
// accumulation, fp16 skipping, offload to the host and an open timeline. One plain rank
// has none.
TEST(Lesson22StepOnDevice, WhatKeepsAStepFromBeingCapturedIsNamed) {
  auto blocker = [](int ranks, const std::function<void(zero::Config&)>& set) {
    std::string why;
    comm::run_threads(ranks, [&](comm::Communicator& comm) {
      manual_seed(22);
      auto m = std::make_shared<lesson::Mixed>();
      zero::Config cfg;
      set(cfg);
      zero::Engine engine(m, comm, cfg, adamw());
      if (comm.rank() == 0) why = engine.capture_blocker();
    });
    return why;
  };
  EXPECT_EQ(blocker(1, [](zero::Config&) {}), "");
  EXPECT_NE(blocker(2, [](zero::Config&) {}).find("2 ranks"), std::string::npos);
  EXPECT_NE(blocker(1, [](zero::Config& c) { c.gradient_accumulation_steps = 2; })
                .find("gradient_accumulation_steps is 2"),
            std::string::npos);
  EXPECT_NE(blocker(1, [](zero::Config& c) { c.precision.fp16 = true; }).find("fp16"),
            std::string::npos);
  // (offload_optimizer blocks it too, on a GPU: on the CPU offload moves nothing.)
  // A timeline blocks it while it is recorded, and no longer once written.
  comm::run_threads(1, [](comm::Communicator& comm) {
    manual_seed(22);
    zero::Engine engine(std::make_shared<lesson::Mixed>(), comm, {}, adamw());
    const lesson::TempDir tmp;
    engine.set_timeline(tmp / "timeline.json");
    EXPECT_NE(engine.capture_blocker().find("timeline"), std::string::npos);
    engine.write_timeline();
    EXPECT_EQ(engine.capture_blocker(), "");
  });
}
