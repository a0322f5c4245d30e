// ZeRO-3 on the GPU (label cuda): the engine with CUDA parameters trains a small model
// (Linear, Conv2d, GroupNorm, LayerNorm) to the parameters of plain CPU training, and
// bf16 mixed precision on the GPU converges, a model of replicas alone clips on the GPU, a
// one-rank thread communicator takes GPU tensors, synchronized BatchNorm runs at one rank,
// a checkpoint saved on the GPU resumes there, checkpointed (recomputed) modules
// train as plain ones, a host model is split onto the GPU one parameter at a time, and a model
// built under zero::Init(comm, gpu) is never whole on the host. One rank:
// the multi-rank path over NCCL is exercised by the NCCL communicator tests under mpirun.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "core/allocator.h"
#include "nn/nn.h"
#include "zero/checkpoint.h"
#include "zero/zero.h"

using namespace zt;

namespace {
class Small : public nn::UnaryModule {
 public:
  Small() : nn::UnaryModule("Small") {
    conv = register_module(
        "conv", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1)));
    gn = register_module("gn", std::make_shared<nn::GroupNorm>(nn::GroupNormOptions(4, 8)));
    fc = register_module("fc", std::make_shared<nn::Linear>(8 * 4 * 4, 16));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({16})));
    head = register_module("head", std::make_shared<nn::Linear>(16, 4));
  }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::GroupNorm> gn;
  std::shared_ptr<nn::Linear> fc, head;
  std::shared_ptr<nn::LayerNorm> ln;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = silu((*gn)((*conv)(x)));
    return (*head)(gelu((*ln)((*fc)(h.flatten(1)))));
  }
};

std::pair<Tensor, Tensor> batch(int step, Device d, DType t = DType::f32) {
  Generator g(300 + static_cast<uint64_t>(step));
  Tensor x = randn({8, 3, 8, 8}, g);
  Tensor y = randn({8, 4}, g);
  return {x.to(t).to(d), y.to(d)};
}

std::vector<Tensor> train(Device d, bool zero_engine, int steps, DType dt = DType::f32,
                          std::vector<double>* losses = nullptr, bool recompute = false,
                          int64_t* conv_calls = nullptr) {
  manual_seed(8);
  auto m = std::make_shared<Small>();
  m->to(d);
  if (conv_calls)
    m->conv->add_forward_pre_hook(
        [conv_calls](nn::Module&, std::vector<Tensor>&) { ++*conv_calls; });
  m->conv->set_checkpointing(recompute);
  m->gn->set_checkpointing(recompute);
  m->fc->set_checkpointing(recompute);
  std::vector<Tensor> out;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::OptimizerConfig opt;
    opt.lr = 5e-3;
    if (!zero_engine) {
      auto o = optim::make_optimizer(opt, m->named_parameters());
      for (int s = 0; s < steps; ++s) {
        m->zero_grad();
        auto [x, y] = batch(s % 4, d);
        mse_loss((*m)(x), y).backward();
        o->step();
      }
      for (auto& p : m->parameters()) out.push_back(p.detach().to(Device::cpu()).clone());
      return;
    }
    zero::Config cfg;
    cfg.stage3_param_persistence_threshold = 0;
    cfg.stage3_max_reuse_distance = 0;
    cfg.precision.bf16 = dt == DType::bf16;
    zero::Engine engine(m, comm, cfg, opt);
    for (int s = 0; s < steps; ++s) {
      auto [x, y] = batch(s % 4, d, dt);
      Tensor loss = mse_loss(engine(x).to(DType::f32), y);
      if (losses) losses->push_back(loss.item());
      engine.backward(loss);
      engine.step();
    }
    zero::GatheredParameters g(*m, comm);
    for (auto& p : m->parameters())
      out.push_back(p.detach().to(DType::f32).to(Device::cpu()).clone());
  });
  return out;
}
}  // namespace

TEST(CudaZero, EngineOnGpuMatchesCpuTraining) {
  ZT_GPU_OR_SKIP("ZeRO on the GPU needs one");
  auto cpu = train(Device::cpu(), false, 5);
  auto gpu = train(Device::cuda(0), true, 5);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_CLOSE(gpu[i], cpu[i], 1e-3, 1e-4) << "param " << i;
}

// Activation checkpointing on the GPU: the recomputation gathers again, on the device,
// and training follows the plain GPU run (the same kernels; tolerance for atomics in
// cuDNN's backward algorithms).
TEST(CudaZero, CheckpointedModulesTrainAsPlainOnes) {
  ZT_GPU_OR_SKIP("recomputation on the GPU needs one");
  std::vector<double> plain_losses, losses;
  int64_t plain_calls = 0, calls = 0;
  auto plain = train(Device::cuda(0), true, 5, DType::f32, &plain_losses, false, &plain_calls);
  auto recomputed = train(Device::cuda(0), true, 5, DType::f32, &losses, true, &calls);
  EXPECT_EQ(calls, 2 * plain_calls) << "the conv ran again in each backward";
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_CLOSE(recomputed[i], plain[i], 1e-5, 1e-7) << "param " << i;
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(losses[i], plain_losses[i], 1e-5);
}

TEST(CudaZero, Bf16MixedPrecisionConverges) {
  ZT_GPU_OR_SKIP("bf16 training on the GPU needs one");
  std::vector<double> losses;
  train(Device::cuda(0), true, 40, DType::bf16, &losses);
  ASSERT_EQ(losses.size(), 40u);
  double first = (losses[0] + losses[1] + losses[2]) / 3;
  double last = (losses[37] + losses[38] + losses[39]) / 3;
  EXPECT_LT(last, 0.9 * first) << "bf16 loss falls on the GPU";
}

// An engine whose trainable parameters are all replicas still trains on the GPU: its norm
// and clip coefficient live where the replicas do (the engine's device), and clipping
// brings the update to the clipped size.
TEST(CudaZero, AllReplicatedModelClipsOnItsDevice) {
  ZT_GPU_OR_SKIP("replicas on the GPU need one");
  comm::run_threads(1, [](comm::Communicator& comm) {
    const Device gpu = Device::cuda(0);
    manual_seed(3);
    auto m = std::make_shared<nn::Linear>(nn::LinearOptions(8, 4));
    m->to(gpu);
    zero::replicate(*m, comm);
    const Tensor w0 = m->weight.detach().to(Device::cpu());
    const Tensor b0 = m->bias.detach().to(Device::cpu());
    zero::Config cfg;
    cfg.gradient_clipping = 1e-3;
    zero::Engine engine(m, comm, cfg, {.type = "sgd", .lr = 1.0});
    EXPECT_EQ(engine.device(), gpu);
    engine.backward(sum(engine(randn({5, 8}).to(gpu))));
    engine.step();
    EXPECT_GT(engine.last_grad_norm(), 1e-3) << "clipping was active";
    // SGD with lr 1 moves the parameters by the clipped gradient, whose norm (weight and
    // bias together) is 1e-3: the weight's part is at most that. (Rounding the 36 updated
    // f32 parameters, below 0.5, moves that norm by under 1e-7, a ten-thousandth of it.)
    const Tensor dw = sub(m->weight.detach().to(Device::cpu()), w0);
    const Tensor db = sub(m->bias.detach().to(Device::cpu()), b0);
    const double dw_sq = sum(mul(dw, dw)).item(), db_sq = sum(mul(db, db)).item();
    EXPECT_LE(std::sqrt(dw_sq), 1e-3 * (1 + 1e-4));
    EXPECT_NEAR(std::sqrt(dw_sq + db_sq), 1e-3, 1e-3 * 1e-3)
        << "the step moved by the clipped size";
  });
}

// A one-rank thread communicator (the apps' --ranks 1 on a GPU) runs each collective in
// place, so it takes GPU tensors although thread ranks exchange host memory.
TEST(CudaZero, OneRankThreadCommunicatorTakesGpuTensors) {
  ZT_GPU_OR_SKIP("GPU tensors need one");
  comm::run_threads(1, [](comm::Communicator& c) {
    const Device gpu = Device::cuda(0);
    const Tensor x = arange(0, 6).to(gpu);
    Tensor t = x.clone();
    c.all_reduce(t, comm::ReduceOp::kSum);
    c.broadcast(t, 0);
    Tensor gathered = Tensor::empty({6}, DType::f32, gpu);
    c.all_gather(gathered, t, /*async=*/true)->wait();
    Tensor reduced = Tensor::empty({6}, DType::f32, gpu);
    c.reduce_scatter(reduced, gathered, comm::ReduceOp::kAvg);
    EXPECT_EQ(reduced.to(Device::cpu()).to_vector(), x.to(Device::cpu()).to_vector());
    // Tensors on two devices are still refused.
    EXPECT_TRUE(test::throws_with([&] { c.all_gather(gathered, x.to(Device::cpu())); },
                                  "but the communicator works on cuda:0"));
  });
}

// Module::to(Device) moves each parameter's gradient with it, as PyTorch does.
TEST(CudaZero, ModuleToMovesGradientsToo) {
  ZT_GPU_OR_SKIP("moving a module needs one");
  nn::Linear lin(3, 2);
  sum(lin(ones({4, 3}))).backward();
  const std::vector<double> g = lin.weight.grad().to_vector();
  lin.to(Device::cuda(0));
  ASSERT_TRUE(lin.weight.grad().defined());
  EXPECT_TRUE(lin.weight.grad().is_cuda());
  EXPECT_EQ(lin.weight.grad().to(Device::cpu()).to_vector(), g);
}

// memory.limit (LaunchOptions::memory_limit) caps a plain start's GPU as well as its host
// memory: a thread rank's communicator works in host memory, but its model is on the GPU.
TEST(CudaZero, LaunchLimitsTheGpuOfAPlainStart) {
  ZT_GPU_OR_SKIP("a GPU limit needs one");
  comm::LaunchOptions o;
  o.device = Device::cuda(0);
  o.memory_limit = int64_t{1} << 20;
  comm::launch(o, [&](comm::Communicator&) {
    EXPECT_EQ(current_ledger()->limit(Device::cuda(0)), o.memory_limit);
    EXPECT_THROW(Tensor::empty({int64_t{1} << 20}, DType::f32, Device::cuda(0)), OutOfMemoryError);
  });
}

// Synchronized BatchNorm at one rank on the GPU (the vqtok recipe's sync_batchnorm): the
// layer uses its own batch statistics with no collective and gives plain BatchNorm's
// outputs, gradients and running statistics.
TEST(CudaZero, SyncBatchNormAtOneRankRunsOnTheGpu) {
  ZT_GPU_OR_SKIP("BatchNorm on the GPU needs one");
  comm::run_threads(1, [](comm::Communicator& comm) {
    const Device gpu = Device::cuda(0);
    Generator g(5);
    const Tensor x = randn({2, 4, 3, 5, 5}, g).to(gpu);
    const Tensor target = randn({2, 4, 3, 5, 5}, g).to(gpu);
    auto plain = std::make_shared<nn::BatchNorm3d>(4);
    auto synced = std::make_shared<nn::BatchNorm3d>(4);
    plain->to(gpu);
    synced->to(gpu);
    EXPECT_EQ(zero::enable_sync_batchnorm(*synced, comm).size(), 1u);
    comm.reset_counters();
    const Tensor want = (*plain)(x), got = (*synced)(x);
    mse_loss(want, target).backward();
    mse_loss(got, target).backward();
    EXPECT_EQ(comm.counters().total_calls(), 0);
    EXPECT_CLOSE(got, want, 1e-5, 1e-6);
    EXPECT_CLOSE(synced->weight.grad(), plain->weight.grad(), 1e-4, 1e-6);
    EXPECT_CLOSE(synced->bias.grad(), plain->bias.grad(), 1e-4, 1e-6);
    EXPECT_CLOSE(synced->running_mean, plain->running_mean, 1e-5, 1e-6);
    EXPECT_CLOSE(synced->running_var, plain->running_var, 1e-5, 1e-6);
  });
}

// A checkpoint of an engine on the GPU (shards, fp32 masters and AdamW's moments in device
// memory) loads into a fresh engine on the GPU, which then continues as the saved one
// does; a GatheredParameters edit (modifier rank 0, as vqtok's dead-code restart makes)
// before the save reaches the shards, the masters and the checkpoint. f32 and bf16.
TEST(CudaZero, CheckpointOfAGpuEngineResumesOnTheGpu) {
  ZT_GPU_OR_SKIP("a GPU engine's checkpoint needs one");
  const Device gpu = Device::cuda(0);
  char tmpl[] = "/tmp/zt_cuda_ckpt_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  for (const DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    comm::run_threads(1, [&](comm::Communicator& comm) {
      zero::Config cfg;
      cfg.stage3_param_persistence_threshold = 0;
      cfg.precision.bf16 = dt == DType::bf16;
      zero::OptimizerConfig opt;
      opt.lr = 5e-3;
      auto make = [&](uint64_t seed) {
        manual_seed(seed);
        auto m = std::make_shared<Small>();
        m->to(gpu);
        return m;
      };
      auto step = [&](zero::Engine& e, int s) {
        auto [x, y] = batch(s, gpu, dt);
        Tensor loss = mse_loss(e(x).to(DType::f32), y);
        const double v = loss.item();
        e.backward(loss);
        e.step();
        return v;
      };
      auto a = make(8);
      zero::Engine ea(a, comm, cfg, opt);
      step(ea, 0);
      step(ea, 1);
      {
        zero::GatheredParameters g({a->head->bias}, comm, /*modifier_rank=*/0);
        autograd::NoGradGuard ng;
        a->head->bias.copy_(full({4}, 0.25, DType::f32, gpu));
      }
      const std::string dir =
          zero::save_checkpoint(ea, root, std::string("ckpt_") + dtype_name(dt));
      const double a2 = step(ea, 2), a3 = step(ea, 3);

      auto b = make(99);  // other initial values, all overwritten by the load
      zero::Engine eb(b, comm, cfg, opt);
      zero::load_checkpoint(eb, dir);
      EXPECT_EQ(eb.global_step(), 2);
      {
        zero::GatheredParameters g({b->head->bias}, comm);
        EXPECT_EQ(b->head->bias.device(), gpu);
        EXPECT_EQ(b->head->bias.to(Device::cpu()).to_vector(), std::vector<double>(4, 0.25));
      }
      const double b2 = step(eb, 2), b3 = step(eb, 3);
      const double rtol = dt == DType::f32 ? 1e-5 : 5e-3;  // bf16: a flipped last bit
      EXPECT_NEAR(b2, a2, rtol * std::abs(a2));
      EXPECT_NEAR(b3, a3, rtol * std::abs(a3));
    });
  }
  std::filesystem::remove_all(root);
}

// A model built whole on the host is split onto the GPU one parameter at a time
// (zero::partition with a device, as the apps build for a GPU): the device never holds
// the whole model, each host parameter is released as its shard is made, the shards hold
// the host values, and the buffers move too. A dominant Linear shows the bound: moving
// the model first and then partitioning peaks at the model plus two copies of it.
TEST(CudaZero, AHostModelIsSplitOntoTheGpuOneParameterAtATime) {
  ZT_GPU_OR_SKIP("splitting onto a GPU needs one");
  comm::run_threads(1, [](comm::Communicator& comm) {
    const Device gpu = Device::cuda(0);
    manual_seed(5);
    auto m = std::make_shared<nn::ModuleDict>();
    m->insert("big", std::make_shared<nn::Linear>(512, 512));
    m->insert("small", std::make_shared<Small>());
    auto bn = std::make_shared<nn::BatchNorm2d>(8);
    m->insert("bn", bn);
    std::vector<std::vector<double>> want;
    int64_t model_bytes = 0, largest = 0;
    for (auto& [n, p] : m->named_parameters()) {
      want.push_back(p.to_vector());
      const int64_t bytes = p.numel() * 4;  // f32
      model_bytes += bytes;
      largest = std::max(largest, bytes);
    }
    const int64_t host_before = memory_stats(Device::cpu()).total_current;
    const int64_t gpu_before = memory_stats(gpu).total_current;
    reset_peak_memory();
    zero::partition(*m, comm, gpu);
    const MemoryCounters on_gpu = memory_stats(gpu);
    EXPECT_LE(on_gpu.total_peak - gpu_before, model_bytes + largest)
        << "the shards and one full parameter at a time";
    EXPECT_LE(memory_stats(Device::cpu()).total_current, host_before - model_bytes)
        << "the host copies are released";
    EXPECT_EQ(bn->running_mean.device(), gpu) << "buffers move with the parameters";
    size_t i = 0;
    for (auto& [n, p] : m->named_parameters()) {
      ASSERT_TRUE(zero::is_partitioned(p)) << n;
      EXPECT_EQ(p.device(), gpu) << n;
      zero::GatheredParameters g({p}, comm);
      EXPECT_EQ(p.to(Device::cpu()).to_vector(), want[i++]) << n << ": the host values";
    }
  });
}

// Built under zero::Init(comm, gpu), as the apps build for a GPU: each parameter's shard is
// made on the GPU as the parameter registers, and its host tensor is released, so the host
// never holds more than one parameter (with its initializer's scratch) where building the
// model whole first holds all four layers. Replicas built in zero::Replicated(comm, gpu) are
// moved as they register. Both hold the values of the same model built on the host.
TEST(CudaZero, AModelBuiltUnderInitOnTheGpuIsNeverWholeOnTheHost) {
  ZT_GPU_OR_SKIP("building onto a GPU needs one");
  const auto build = [] {
    auto m = std::make_shared<nn::ModuleDict>();
    for (int i = 0; i < 4; ++i)
      m->insert("fc" + std::to_string(i), std::make_shared<nn::Linear>(256, 256));
    m->insert("bn", std::make_shared<nn::BatchNorm2d>(8));
    return m;
  };
  manual_seed(5);
  std::vector<std::vector<double>> want;
  int64_t model_bytes = 0, largest = 0;
  for (auto& [n, p] : build()->named_parameters()) {
    want.push_back(p.to_vector());
    model_bytes += p.numel() * 4;  // f32
    largest = std::max(largest, p.numel() * 4);
  }
  ASSERT_GE(model_bytes, 4 * largest) << "the bound below tells one layer from the model";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const Device gpu = Device::cuda(0);
    const auto check = [&](nn::Module& m, bool partitioned) {
      size_t i = 0;
      for (auto& [n, p] : m.named_parameters()) {
        EXPECT_EQ(zero::is_partitioned(p), partitioned) << n;
        EXPECT_EQ(zero::is_replicated(p), !partitioned) << n;
        EXPECT_EQ(p.device(), gpu) << n;
        zero::GatheredParameters g({p}, comm);
        EXPECT_EQ(p.to(Device::cpu()).to_vector(), want[i++]) << n << ": the host values";
      }
      for (auto& [n, b] : m.named_buffers()) EXPECT_EQ(b.device(), gpu) << n;
    };
    manual_seed(5);
    const int64_t host_before = memory_stats(Device::cpu()).total_current;
    reset_peak_memory();
    std::shared_ptr<nn::ModuleDict> m;
    {
      zero::Init init(comm, gpu);
      m = build();
    }
    EXPECT_LE(memory_stats(Device::cpu()).total_peak - host_before, 2 * largest)
        << "one parameter at a time on the host";
    EXPECT_LE(memory_stats(Device::cpu()).total_current, host_before) << "nothing kept there";
    check(*m, /*partitioned=*/true);

    manual_seed(5);
    std::shared_ptr<nn::ModuleDict> r;
    {
      zero::Replicated replicas(comm, gpu);
      r = build();
    }
    check(*r, /*partitioned=*/false);
  });
}
