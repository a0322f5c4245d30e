// Lesson 21 — optimizer offload, on the CPU.
// The concept: `offload_optimizer: {device: cpu}` keeps the fp32 master shards and the
// optimizer state (Adam's moments) in host memory, where the fused CPU optimizer updates
// them, so a GPU holds only the storage-dtype shards and gradients. Around each update
// (zero/offload.h):
//
//   device grad shard --copy stream, D2H--> host grad buffer  (optimizer reads it)
//   host fp32 master --round to storage dtype on the host--> host staging
//   host staging (or the master itself for f32) --copy stream, H2D--> device shard
//
// Invariant checked here: when the model trains on the CPU the state already lives
// there: OptimizerOffload::moves() is false and the step takes the same path as without
// offload, so training is bit for bit the same (at one rank and at two, in f32 and with
// bf16 masters). What this lesson checks is the reporting: the setting is accepted, the
// log line and the memory report say the optimizer state is on the cpu. (The GPU side,
// where the state really moves, is tests/cuda/test_cuda_offload.cpp: there the device's
// optimizer state drops to 0 bytes, and the host holds 12 bytes per shard element for
// AdamW (the fp32 master and the two moments) plus an fp32 gradient buffer of 4.)
#include <cstring>

#include "common/mlp.h"
#include "zero/lesson_util.h"
#include "zero/memory_plan.h"

using namespace zt;

namespace {

std::shared_ptr<nn::Sequential> mlp() {
  return test::mlp(12, 40, 5);
}

struct Run {
  std::vector<double> losses;                          // rank 0's, per step
  std::vector<std::pair<std::string, Tensor>> params;  // full values at the end
  zero::MemoryReport report;
  std::string log;
};

constexpr int kSteps = 6;

// kSteps AdamW steps at `world` thread ranks; each rank trains on its slice of the batch.
Run train(int world, bool offload, bool bf16) {
  Run out;
  ::testing::internal::CaptureStderr();
  comm::run_threads(world, [&](comm::Communicator& comm) {
    manual_seed(21);
    std::shared_ptr<nn::Sequential> m;
    {
      zero::Init init(comm);
      m = mlp();
    }
    zero::Config cfg;
    cfg.stage3_param_persistence_threshold = 0;
    cfg.precision.bf16 = bf16;
    cfg.gradient_clipping = 1.0;
    cfg.offload_optimizer.device = offload ? zero::OffloadDevice::kCpu : zero::OffloadDevice::kNone;
    cfg.offload_optimizer.pin_memory = true;  // nothing to pin on the CPU: ignored
    zero::OptimizerConfig opt;
    opt.lr = 3e-3;
    opt.weight_decay = 0.05;  // AdamW (the default optimizer)
    zero::Engine engine(m, comm, cfg, opt);
    for (int s = 0; s < kSteps; ++s) {
      Generator g(100);  // one batch: the loss must fall
      Tensor x = randn({8, 12}, g), y = randn({8, 5}, g);
      Tensor xr = lesson::rank_slice(x, comm), yr = lesson::rank_slice(y, comm);
      if (bf16) xr = xr.to(DType::bf16);
      Tensor loss = mse_loss(engine(xr).to(DType::f32), yr);
      if (comm.rank() == 0) out.losses.push_back(loss.item());
      engine.backward(loss);
      engine.step();
    }
    auto full = lesson::full_parameters(*m, comm);
    if (comm.rank() == 0) {
      out.params = full;
      out.report = engine.memory_report();
    }
  });
  out.log = ::testing::internal::GetCapturedStderr();
  return out;
}

// Same dtype, shape and bytes.
bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * dtype_size(ca.dtype())) == 0;
}

void expect_identical(int world, bool bf16) {
  SCOPED_TRACE("world " + std::to_string(world) + (bf16 ? ", bf16" : ", f32"));
  // The reason the two runs below agree: on the CPU the offload has nothing to move.
  zero::OffloadOptimizer offload;
  offload.device = zero::OffloadDevice::kCpu;
  offload.pin_memory = true;
  EXPECT_FALSE(zero::OptimizerOffload(offload, Device::cpu()).moves());
  Run plain = train(world, false, bf16);
  Run off = train(world, true, bf16);
  ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(off.losses.size(), plain.losses.size());
  for (int s = 0; s < kSteps; ++s)
    EXPECT_EQ(off.losses[s], plain.losses[s]) << "loss at step " << s;
  EXPECT_LT(plain.losses.back(), plain.losses.front()) << "it trains";
  ASSERT_EQ(off.params.size(), plain.params.size());
  ASSERT_EQ(off.params.size(), 6u);
  for (size_t i = 0; i < plain.params.size(); ++i)
    EXPECT_TRUE(bit_equal(off.params[i].second, plain.params[i].second)) << plain.params[i].first;

  // Reported: the log line and the memory report name the cpu as the state's home.
  EXPECT_NE(off.log.find("offload_optimizer: optimizer state on cpu"), std::string::npos)
      << off.log;
  EXPECT_EQ(plain.log.find("offload_optimizer"), std::string::npos) << plain.log;
  EXPECT_TRUE(off.report.optim_offloaded);
  EXPECT_FALSE(plain.report.optim_offloaded);
  EXPECT_GT(off.report.optim_state, 0);
  EXPECT_EQ(off.report.optim_state, plain.report.optim_state) << "nothing moved on the cpu";
  EXPECT_EQ(off.report.optim_state_host, 0) << "counted once, as optim_state";
  EXPECT_EQ(off.report.grad_shard_host, 0) << "no extra gradient buffers on the cpu";
  EXPECT_NE(off.report.json().find("\"optim_state_device\":\"cpu\""), std::string::npos)
      << off.report.json();
  EXPECT_EQ(plain.report.json().find("optim_state_device"), std::string::npos);
}

}  // namespace

TEST(Lesson21OptimizerOffload, CpuTrainingIsBitIdenticalAtOneRank) {
  expect_identical(1, false);
}

TEST(Lesson21OptimizerOffload, CpuTrainingIsBitIdenticalAtTwoRanks) {
  expect_identical(2, false);
}

TEST(Lesson21OptimizerOffload, Bf16MastersAreBitIdenticalAtTwoRanks) {
  expect_identical(2, true);
}

TEST(Lesson21OptimizerOffload, PlannerKeepsCpuStateWhereItIs) {
  // On the CPU the plan with offload equals the plan without it (nothing moves).
  manual_seed(1);
  auto m = mlp();
  zero::Config cfg;
  zero::MemoryPlan plain = zero::plan_memory(*m, 2, cfg);
  cfg.offload_optimizer.device = zero::OffloadDevice::kCpu;
  zero::MemoryPlan off = zero::plan_memory(*m, 2, cfg);
  EXPECT_EQ(off.optim_state, plain.optim_state);
  EXPECT_GT(off.optim_state, 0);
  EXPECT_EQ(off.optim_state_host, 0);
  EXPECT_EQ(off.json(), plain.json());
}
