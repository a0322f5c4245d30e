// Optimizer offload on the GPU (label cuda): with offload_optimizer {device: cpu}, the
// engine on CUDA parameters keeps fp32 masters and AdamW's moments in host memory and
// updates them with the CPU optimizer. Training matches training with the state on the
// device (f32 and bf16, pinned and pageable host buffers), the device's optimizer-state
// bytes drop to zero while the host holds them, and the planner predicts the move.
#include <gtest/gtest.h>

#include "common/gpu_skip.h"
#include "common/mlp.h"
#include "common/test_util.h"
#include "nn/nn.h"
#include "zero/memory_plan.h"
#include "zero/zero.h"

using namespace zt;

namespace {

std::shared_ptr<nn::Sequential> mlp() {
  return test::mlp(16, 64, 4);
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;  // fp32, on the CPU
  zero::MemoryReport report;
  int64_t device_optim_after_step = -1;  // the device ledger's optimizer-state bytes
};

// The seeded MLP on the GPU, and the engine settings every test here starts from.
std::shared_ptr<nn::Module> gpu_mlp() {
  manual_seed(16);
  auto m = mlp();
  m->to(Device::cuda(0));
  return m;
}
zero::Config nothing_persists() {
  zero::Config cfg;
  cfg.stage3_param_persistence_threshold = 0;
  return cfg;
}

Run train(bool offload, bool pin, DType dt, int steps = 8) {
  Run out;
  auto m = gpu_mlp();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::Config cfg = nothing_persists();
    cfg.precision.bf16 = dt == DType::bf16;
    cfg.offload_optimizer.device = offload ? zero::OffloadDevice::kCpu : zero::OffloadDevice::kNone;
    cfg.offload_optimizer.pin_memory = pin;
    zero::OptimizerConfig opt;
    opt.lr = 3e-3;
    opt.weight_decay = 0.05;
    zero::Engine engine(m, comm, cfg, opt);
    for (int s = 0; s < steps; ++s) {
      Generator g(40 + static_cast<uint64_t>(s % 4));
      Tensor x = randn({16, 16}, g).to(dt).to(Device::cuda(0));
      Tensor y = randn({16, 4}, g).to(Device::cuda(0));
      Tensor loss = mse_loss(engine(x).to(DType::f32), y);
      out.losses.push_back(loss.item());
      engine.backward(loss);
      engine.step();
      out.device_optim_after_step = memory_stats(Device::cuda(0)).cur(MemTag::kOptimState);
    }
    out.report = engine.memory_report();
    zero::GatheredParameters g(*m, comm);
    for (auto& p : m->parameters())
      out.params.push_back(p.detach().to(DType::f32).to(Device::cpu()).clone());
  });
  return out;
}

void expect_matches(DType dt, bool pin, double rtol, double atol) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + (pin ? ", pinned" : ", pageable"));
  Run dev = train(false, false, dt);
  Run off = train(true, pin, dt);
  ASSERT_EQ(off.params.size(), dev.params.size());
  for (size_t i = 0; i < dev.params.size(); ++i)
    EXPECT_CLOSE(off.params[i], dev.params[i], rtol, atol) << "param " << i;
  for (size_t s = 0; s < dev.losses.size(); ++s)
    EXPECT_NEAR(off.losses[s], dev.losses[s], 1e-3 * std::abs(dev.losses[s]) + 1e-5)
        << "step " << s;
  ASSERT_GE(off.losses.size(), 5u);
  EXPECT_LT(off.losses[4], off.losses[0])
      << "offloaded training learns (step 4 sees step 0's batch)";

  // Device training keeps the moments (and bf16's masters) on the device; offload none.
  EXPECT_GT(dev.report.optim_state, 0);
  EXPECT_EQ(off.report.optim_state, 0) << "no optimizer state left on the device";
  EXPECT_EQ(off.device_optim_after_step, 0);
  EXPECT_TRUE(off.report.optim_offloaded);
  // Host: fp32 master + two moments per element.
  const int64_t numel = 16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4;
  EXPECT_EQ(off.report.optim_state_host, 12 * numel) << off.report.json();
  EXPECT_EQ(off.report.grad_shard_host, 4 * numel);
}

}  // namespace

TEST(CudaOffload, F32MatchesDeviceTrainingPinned) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  expect_matches(DType::f32, true, 1e-4, 1e-5);
}

TEST(CudaOffload, F32MatchesDeviceTrainingPageable) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  expect_matches(DType::f32, false, 1e-4, 1e-5);
}

TEST(CudaOffload, Bf16MatchesDeviceTraining) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  expect_matches(DType::bf16, true, 2e-2, 1e-3);
}

TEST(CudaOffload, PlannerMovesOptimizerStateToTheHost) {
  ZT_GPU_OR_SKIP("planning a GPU model needs one");
  manual_seed(1);
  auto m = mlp();
  m->to(Device::cuda(0));
  zero::Config cfg;
  zero::MemoryPlan dev = zero::plan_memory(*m, 1, cfg);
  cfg.offload_optimizer.device = zero::OffloadDevice::kCpu;
  zero::MemoryPlan off = zero::plan_memory(*m, 1, cfg);
  EXPECT_GT(dev.optim_state, 0);
  EXPECT_EQ(off.optim_state, 0);
  EXPECT_EQ(off.optim_state_host, dev.optim_state + dev.param_shard) << "moments + fp32 master";
  int64_t numel = 0;
  for (const auto& [name, p] : m->named_parameters()) numel += p.numel();
  // Host gradient shards are exact; the device's flat buffer pads each to a 16-element slot.
  EXPECT_EQ(off.grad_shard_host, 4 * numel);
  EXPECT_EQ(off.grad_shard, dev.grad_shard);
  EXPECT_EQ(off.param_shard, dev.param_shard);
}

// A model an offloading engine trained in f32 keeps its fp32 master in host memory; a
// later f32 engine without offload copies that master into the shard (which it is for
// f32) and drops it, rather than moving it back beside the shard: the device then holds
// the 16 bytes per element the planner counts, not 20.
TEST(CudaOffload, AnF32EngineAfterAnOffloadingOneKeepsNoMaster) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  auto m = gpu_mlp();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::Config cfg = nothing_persists();
    auto loss = [&](zero::Engine& e) {
      Generator g(40);
      Tensor x = randn({16, 16}, g).to(Device::cuda(0));
      Tensor y = randn({16, 4}, g).to(Device::cuda(0));
      return mse_loss(e(x), y);
    };
    std::vector<std::vector<double>> masters;
    {
      zero::Config off = cfg;
      off.offload_optimizer.device = zero::OffloadDevice::kCpu;
      zero::Engine engine(m, comm, off, {});
      for (int s = 0; s < 2; ++s) {
        engine.backward(loss(engine));
        engine.step();
      }
      for (const Tensor& p : m->parameters())
        masters.push_back(zero::zero_param(p)->master.to_vector());
    }
    zero::Engine engine(m, comm, cfg, {});
    size_t i = 0;
    for (const Tensor& p : m->parameters()) {
      const zero::ZeroParam* z = zero::zero_param(p);
      EXPECT_FALSE(z->master.defined()) << p.name();
      EXPECT_EQ(z->shard.to(Device::cpu()).to_vector(), masters[i++]) << p.name();
    }
    const zero::MemoryPlan plan = zero::plan_memory(*m, 1, cfg);
    const zero::MemoryReport r = zero::measure_memory(engine, [&] { return loss(engine); });
    EXPECT_EQ(plan.model_state(), r.model_state()) << r.json();
  });
}

// bf16 with offload: the host holds each shard element's fp32 master and moments (12 B),
// a gradient buffer (4 B) and the staging copy the master is rounded into (2 B); the
// planner predicts each, and its host total is within what the host's ledger held.
TEST(CudaOffload, PlannerCountsTheHostStagingCopies) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  auto m = gpu_mlp();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::Config cfg = nothing_persists();
    cfg.precision.bf16 = true;
    cfg.offload_optimizer.device = zero::OffloadDevice::kCpu;
    cfg.offload_optimizer.pin_memory = true;
    zero::Engine engine(m, comm, cfg, {});
    const zero::MemoryPlan plan = zero::plan_memory(*m, 1, cfg);
    const zero::MemoryReport r = zero::measure_memory(engine, [&] {
      Generator g(40);
      Tensor x = randn({16, 16}, g).to(DType::bf16).to(Device::cuda(0));
      Tensor y = randn({16, 4}, g).to(Device::cuda(0));
      return mse_loss(engine(x).to(DType::f32), y);
    });
    const int64_t numel = 16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4;
    EXPECT_EQ(plan.staging_host, 2 * numel);
    EXPECT_EQ(r.staging_host, plan.staging_host) << r.json();
    EXPECT_EQ(r.optim_state_host, plan.optim_state_host);
    EXPECT_EQ(r.grad_shard_host, plan.grad_shard_host);
    EXPECT_EQ(plan.host(), 18 * numel);
    EXPECT_GE(r.host_total_peak, plan.host());
    EXPECT_EQ(plan.model_state(), r.model_state());
  });
}

// The step's uploads write the device shards: a graph recorded before the step is refused
// after it, as without offload (the upload counts as a write of each shard, which the
// engine's stale-graph check and, at one rank, autograd's saved-tensor check both read).
TEST(CudaOffload, AGraphFromBeforeTheStepIsRefusedAfterIt) {
  ZT_GPU_OR_SKIP("optimizer offload from a GPU needs one");
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto m = gpu_mlp();
    comm::run_threads(1, [&](comm::Communicator& comm) {
      zero::Config cfg = nothing_persists();
      cfg.precision.bf16 = dt == DType::bf16;
      cfg.offload_optimizer.device = zero::OffloadDevice::kCpu;
      zero::Engine engine(m, comm, cfg, {});
      Generator g(40);
      Tensor x = randn({16, 16}, g).to(dt).to(Device::cuda(0));
      Tensor y = randn({16, 4}, g).to(Device::cuda(0));
      const Tensor loss = mse_loss(engine(x).to(DType::f32), y);
      engine.backward(loss, /*retain_graph=*/true);
      ASSERT_TRUE(engine.step());
      const std::string why = test::error_of([&] { engine.backward(loss); });
      EXPECT_TRUE(why.find("made before an optimizer step") != std::string::npos ||
                  why.find("was written in place since the forward") != std::string::npos)
          << why;
    });
  }
}
