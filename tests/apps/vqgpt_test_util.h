// What the vqgpt app tests share: a scratch folder, the tiny vqgpt config and a
// "pretrained" tokenizer for it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/vqgpt/vqgpt_app.h"
#include "configs/config.h"
#include "core/ops.h"
#include "nn/state_dict.h"

namespace zt::vqgpt_test {

// A unique scratch folder, removed at the end of the test.
struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name)
      : dir(std::filesystem::path(::testing::TempDir()) /
            ("zt_vqgpt_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

// The tiny vqgpt config: `extra` is YAML appended to it, `sets` are `--set key=value` overrides
// applied after that.
inline config::AppConfig tiny_config(const std::string& out_dir, const std::string& extra = "",
                                     const std::vector<std::string>& sets = {}) {
  const std::string y = R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 2, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 256, eval_samples: 16,
       seed: 3, prefetch: 1}
train: {steps: 5, batch: 8, lr: 3.0e-3, schedule: constant, gradient_clipping: 1.0,
        log_every: 5, eval_every: 0, checkpoint_every: 0, seed: 1}
zero_optimization: {stage3_param_persistence_threshold: 100, reduce_bucket_size: 5000,
                    stage3_prefetch_bucket_size: 5000}
buffers: {sync: broadcast, verify_every: 2}
replicated: [tokenizer]
output_dir: ")" + out_dir +
                        "\"\n" + extra;
  const config::Node root = config::parse_yaml(y, "<test vqgpt>");
  for (const std::string& s : sets) config::apply_override(root, s);
  return config::parse_app_config(root, config::App::vqgpt);
}

// A "pretrained" tokenizer: random weights and non-default BatchNorm statistics.
inline nn::NamedTensors pretrained_tokenizer(const config::AppConfig& cfg) {
  manual_seed(77);
  vq::VqModel tok(cfg.model);
  Generator g(78);
  for (const auto& [name, b] : tok.named_buffers()) {
    if (name.find("running_mean") != std::string::npos) b.copy_(randn(b.sizes(), g) * 0.5);
    if (name.find("running_var") != std::string::npos) b.copy_(rand(b.sizes(), g) + 0.5);
  }
  nn::NamedTensors state;
  for (const auto& [n, t] : nn::state_dict(tok)) state.emplace_back(n, t.clone());
  return state;
}

}  // namespace zt::vqgpt_test
