// vqgpt's quick tokenizer reads the run's data as the run does: the vqtok config it trains
// with (saved with its checkpoint) carries the image folder's settings, including
// data.on_bad_image, so a folder holding an unreadable file trains the tokenizer as it
// trains the GPT, and no key of synthetic data that would warn when the config is read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/app_test_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "data/image.h"
#include "zero/comm/thread_comm.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

TEST(QuickTokenizer, KeepsTheImageFolderSettings) {
  const std::string dir = apptest::fresh_dir("zt_quick_tok", "data");
  fs::create_directories(dir + "/images");
  for (int i = 0; i < 8; ++i) {
    data::Image img{8, 8, std::vector<uint8_t>(8 * 8 * 3, static_cast<uint8_t>(30 * i))};
    data::save_png(dir + "/images/" + std::to_string(i) + ".png", img);
  }
  const std::string y = R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 2, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: image_folder, frames: 1, height: 8, width: 8, eval_samples: 4, prefetch: 1,
       fit: stretch, on_bad_image: skip, path: ")" +
                        dir +
                        R"(/images"}
train: {steps: 1, batch: 4, eval_every: 0, checkpoint_every: 0}
replicated: [tokenizer]
output_dir: ")" + dir + "/run\"\n";
  const config::AppConfig cfg =
      config::parse_app_config(config::parse_yaml(y, "<test>"), config::App::vqgpt);
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const std::string ck = vqgpt::train_quick_tokenizer(cfg, 1, dir + "/tok", comm, true);
    std::ifstream meta(ck + "/meta.json");
    const config::AppConfig saved = config::parse_app_config(
        config::parse_yaml(nlohmann::json::parse(meta).value("config_yaml", "")),
        config::App::vqtok);
    EXPECT_EQ(saved.data.kind, data::DataKind::image_folder);
    EXPECT_EQ(saved.data.fit, data::Fit::stretch);
    EXPECT_EQ(saved.data.on_bad_image, data::OnBadImage::skip);
    for (const std::string& w : saved.warnings)  // synthetic's keys are left out
      EXPECT_EQ(w.find("num_shapes"), std::string::npos) << w;
  });
  fs::remove_all(dir);
}

}  // namespace
