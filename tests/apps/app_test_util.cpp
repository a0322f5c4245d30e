// The tiny vqtok configuration and temp folders shared by the app tests.
#include "apps/app_test_util.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "apps/vqtok/model/vq_model.h"
#include "configs/config.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/comm/thread_comm.h"

namespace zt::apptest {

namespace {
const char* kTinyVqtok = R"(
model: {codebook_size: 64, embed_dim: 4, z_channels: 4, ch: 32, ch_mult: [1, 1, 1, 1],
        num_res_blocks: 1, attn_resolutions: [3], temporal_downsample_factor: 4}
data: {kind: synthetic, frames: 4, height: 16, width: 16, num_samples: 64, eval_samples: 8,
       seed: 7, workers: 1, prefetch: 1}
train: {steps: 8, batch: 2, lr: 3.0e-3, schedule: constant, warmup: 0, log_every: 1,
        eval_every: 8, eval_batches: 1, checkpoint_every: 4, keep_checkpoints: 2,
        gradient_clipping: 1.0}
loss: {l2: 1.0, l1: 0.1, vq: 1.0, commitment: 0.25}
zero_optimization: {stage: 3, stage3_param_persistence_threshold: 100,
                    reduce_bucket_size: 20000, stage3_prefetch_bucket_size: 20000}
buffers: {sync: average}
output_dir: unset
)";
}  // namespace

config::AppConfig tiny_vqtok_config(const std::string& out_dir, std::vector<std::string> sets) {
  config::Node root = config::parse_yaml(kTinyVqtok, "tiny vqtok test config");
  sets.push_back("output_dir=" + out_dir);
  for (const auto& s : sets) config::apply_override(root, s);
  return config::parse_app_config(root, config::App::vqtok);
}

vqtok::TrainResult train_vqtok(const config::AppConfig& cfg, bool resume, int ranks,
                               bool overwrite) {
  vqtok::TrainResult out;
  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    o.resume = resume;
    o.overwrite = overwrite;
    vqtok::TrainResult r = vqtok::train(cfg, o, comm);
    if (comm.rank() == 0) out = r;
  });
  return out;
}

std::string fresh_dir(const std::string& prefix, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / (prefix + "_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

void save_fresh_tokenizer(const config::AppConfig& cfg, const std::string& weights) {
  manual_seed(5);
  vq::VqModel tok(cfg.model);
  nn::save_safetensors(weights, nn::state_dict(tok));
}

void encode_on_one_rank(const config::AppConfig& cfg, const vqtok::EncodeOptions& o) {
  comm::run_threads(1, [&](comm::Communicator& comm) { vqtok::encode(cfg, o, comm); });
}

std::vector<vqgpt::TrainResult> train_vqgpt_with_fresh_tokenizer(const config::AppConfig& cfg,
                                                                 const std::string& weights,
                                                                 int ranks) {
  save_fresh_tokenizer(cfg, weights);
  std::vector<vqgpt::TrainResult> results(static_cast<size_t>(ranks));
  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions o;
    o.quiet = true;
    o.tokenizer = weights;
    results[static_cast<size_t>(comm.rank())] = vqgpt::train(cfg, o, comm);
  });
  return results;
}

void expect_losses_follow(const std::vector<double>& eager, const std::vector<double>& graphed,
                          size_t steps) {
  ASSERT_EQ(eager.size(), steps);
  ASSERT_EQ(graphed.size(), steps);
  for (size_t i = 0; i < steps; ++i)
    EXPECT_NEAR(graphed[i], eager[i], 1e-5 * std::abs(eager[i])) << "step " << i + 1;
}

}  // namespace zt::apptest
