// vqgpt on a GPU (skipped without one): training in f32 gives the CPU run's losses and
// parameters (and sampling runs there too), training in bf16 follows the f32 CPU run's
// loss curve, and a step replayed from a CUDA graph follows the eager steps.
#include <cmath>
#include <map>

#include "apps/app_test_util.h"
#include "apps/vqgpt_test_util.h"
#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "nn/safetensors.h"
#include "zero/comm/launch.h"

using namespace zt;
using namespace zt::vqgpt_test;

// f32 with exact arithmetic on both devices (train.tf32: none): only the order of the
// sums differs, so losses agree to 1e-4 relative and parameters after 4 AdamW steps
// (lr 3e-3) to 1e-3 relative / 1e-5 absolute.
TEST(VqGpt, CudaTrainingMatchesTheCpuRunInF32) {
  ZT_GPU_OR_SKIP("vqgpt CUDA training needs a GPU");
  Scratch s("cuda");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(tiny_config(s / "x")));
  std::map<std::string, vqgpt::TrainResult> results;
  std::map<std::string, nn::NamedTensors> exported;
  for (const std::string dev : {"cpu", "cuda"}) {
    config::AppConfig c = tiny_config(s / dev);
    c.train.steps = 4;
    c.train.log_every = 1;
    c.train.checkpoint_every = 4;
    c.train.device = dev;
    c.train.tf32 = "none";
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      results[dev] = vqgpt::train(c, o, comm);
      vqgpt::export_model(c, "", s / (dev + ".safetensors"), comm, true);
      vqgpt::SampleOptions so;
      so.num = 2;
      so.quiet = true;
      const vqgpt::SampleResult sr = vqgpt::sample(c, so, comm);
      EXPECT_EQ(sr.frames.sizes(), (Shape{2, 4, 3, 8, 8})) << dev;
    });
    exported[dev] = nn::load_safetensors(s / (dev + ".safetensors"));
  }
  const auto& cpu = results["cpu"].log_losses;
  const auto& gpu = results["cuda"].log_losses;
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * std::abs(cpu[i])) << "step " << i + 1;
  ASSERT_EQ(exported["cuda"].size(), exported["cpu"].size());
  for (size_t i = 0; i < exported["cpu"].size(); ++i)
    EXPECT_CLOSE(exported["cuda"][i].second, exported["cpu"][i].second, 1e-3, 1e-5)
        << exported["cpu"][i].first;
}

// vqgpt trained in bf16 on the GPU (tensor-core GEMMs, fused
// attention, f32 master shards) follows the f32 CPU run's loss curve from the same
// tokenizer, weights and batches. The tolerance is bf16's: each op rounds to 8 bits of
// mantissa (relative 2^-9); on the CPU, bf16 follows f32 here to 1e-4 relative over the
// 20 steps. The GPU's tensor-core GEMMs and fused attention round in their own order, so
// 2% relative at every logged window; a path that computes wrongly (a wrong GEMM or
// attention) gives losses tens of percent off, or NaN.
TEST(VqGpt, CudaBf16TrainingFollowsTheCpuF32Curve) {
  ZT_GPU_OR_SKIP("vqgpt CUDA training needs a GPU");
  Scratch s("bf16");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(tiny_config(s / "x")));
  std::map<std::string, std::vector<double>> losses;
  for (const std::string dev : {"cpu", "cuda"}) {
    // bf16 as a config asks for it (the engine's precision is resolved when it is parsed).
    config::AppConfig c = tiny_config(s / dev, dev == "cuda" ? "bf16: {enabled: true}\n" : "");
    c.train.steps = 20;
    c.train.log_every = 4;
    c.train.device = dev;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      const vqgpt::TrainResult r = vqgpt::train(c, o, comm);
      losses[dev] = r.log_losses;
      EXPECT_EQ(r.loss_reads, 6) << dev << ": after step 1 and at the 5 log steps";
    });
  }
  const std::vector<double>& cpu = losses["cpu"];
  const std::vector<double>& gpu = losses["cuda"];
  ASSERT_EQ(cpu.size(), 5u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(std::isfinite(gpu[i])) << "window " << i;
    EXPECT_NEAR(gpu[i], cpu[i], 2e-2 * std::abs(cpu[i])) << "window " << i;
  }
  EXPECT_LT(gpu.back(), gpu.front()) << "the bf16 run learns";
}

// train.cuda_graph on the GPU: the replayed step (tokenizer encoding, token layout, GPT,
// update) follows the eager run's losses (1e-5 relative: cuBLAS may add in another order on
// another stream), and the tokenizer's share is not timed apart.
TEST(VqGpt, CudaGraphTrainingFollowsEagerTrainingOnTheGpu) {
  ZT_GPU_OR_SKIP("train.cuda_graph needs a GPU");
  Scratch s("graph");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(tiny_config(s / "x")));
  std::map<bool, vqgpt::TrainResult> results;
  for (const bool graphed : {false, true}) {
    config::AppConfig c = tiny_config(s / (graphed ? "graphed" : "eager"));
    c.train.steps = 6;
    c.train.log_every = 1;
    c.train.eval_every = 0;
    c.train.checkpoint_every = 0;
    c.train.device = "cuda";
    c.train.cuda_graph = graphed;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      results[graphed] = vqgpt::train(c, o, comm);
    });
  }
  apptest::expect_losses_follow(results[false].log_losses, results[true].log_losses, 6);
  EXPECT_EQ(results[true].steps, 6);
  EXPECT_EQ(results[true].tokenizer_share, 0.0);  // not timed apart under a graph
  EXPECT_GT(results[false].tokenizer_share, 0.0);
}
