// vqgpt's quick tokenizer reads the run's data as the run does: the vqtok config it trains
// with (saved with its checkpoint) carries the image folder's settings, including
// data.on_bad_image, and the loader's (shuffle, workers, prefetch, timeout), so a folder
// holding an unreadable file trains the tokenizer as it trains the GPT, and no key of
// synthetic data that would warn when the config is read; data.path and the output folder
// read back from that config as they were given. Its batch of 4 per rank is the run's
// train.batch where that is smaller: data that the run can read is data it can train on.
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

// A vqgpt config over 8 small images in `images`, and the vqtok config a quick tokenizer
// trained on it (in `out`, one step) saved with its checkpoint.
struct QuickRun {
  config::AppConfig cfg, saved;
};
// `n` plain 8x8 images in the folder `images`.
void write_images(const std::string& images, int n) {
  fs::create_directories(images);
  for (int i = 0; i < n; ++i) {
    data::Image img{8, 8, std::vector<uint8_t>(8 * 8 * 3, static_cast<uint8_t>(30 * i))};
    data::save_png(images + "/" + std::to_string(i) + ".png", img);
  }
}

QuickRun train_quick(const std::string& images, const std::string& out) {
  write_images(images, 8);
  const std::string y = R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 2, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: image_folder, frames: 1, height: 8, width: 8, eval_samples: 4, prefetch: 1,
       fit: stretch, on_bad_image: skip, shuffle: false, workers: 2, timeout: 30,
       path: set below}
train: {steps: 1, batch: 4, eval_every: 0, checkpoint_every: 0}
replicated: [tokenizer]
output_dir: unused
)";
  QuickRun r;
  r.cfg = config::parse_app_config(config::parse_yaml(y, "<test>"), config::App::vqgpt);
  r.cfg.data.path = images;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const std::string ck = vqgpt::train_quick_tokenizer(r.cfg, 1, out, comm, true);
    std::ifstream meta(ck + "/meta.json");
    r.saved = config::parse_app_config(
        config::parse_yaml(nlohmann::json::parse(meta).value("config_yaml", "")),
        config::App::vqtok);
  });
  return r;
}

TEST(QuickTokenizer, KeepsTheImageFolderSettings) {
  const std::string dir = apptest::fresh_dir("zt_quick_tok", "data");
  const config::AppConfig saved = train_quick(dir + "/images", dir + "/tok").saved;
  EXPECT_EQ(saved.data.kind, data::DataKind::image_folder);
  EXPECT_EQ(saved.data.fit, data::Fit::stretch);
  EXPECT_EQ(saved.data.on_bad_image, data::OnBadImage::skip);
  // And how the loader reads it: its order, threads, read-ahead and timeout.
  EXPECT_FALSE(saved.data.shuffle);
  EXPECT_EQ(saved.data.workers, 2);
  EXPECT_EQ(saved.data.prefetch, 1);
  EXPECT_EQ(saved.data.timeout, 30.0);
  // Synthetic's keys (num_shapes, num_samples) are left out: its config warns of nothing.
  for (const std::string& w : saved.warnings) ADD_FAILURE() << w;
  fs::remove_all(dir);
}

// Paths reach its config as they are: quotes, backslashes (YAML escapes in double quotes)
// and a colon are characters of the name.
TEST(QuickTokenizer, KeepsPathsAsTheyAre) {
  const std::string dir = apptest::fresh_dir("zt_quick_tok", "paths");
  const std::string images = dir + "/raw\\new \"q\" 'x': y", out = dir + "/tok\\t \"z\"";
  const config::AppConfig saved = train_quick(images, out).saved;
  EXPECT_EQ(saved.data.path, images);
  EXPECT_EQ(saved.output_dir, out);
  fs::remove_all(dir);
}

// Three images and a run of train.batch 1: the recipe's batch of 4 does not fit the data,
// so it reads at the run's batch; its error would name train.batch as 4, a value the user
// never set and whose lowering changed nothing.
TEST(QuickTokenizer, ReadsAtTheRunsBatchWhereThatIsSmaller) {
  const std::string dir = apptest::fresh_dir("zt_quick_tok", "batch");
  write_images(dir + "/images", 3);
  const std::string y = R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 2, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: image_folder, frames: 1, height: 8, width: 8, eval_samples: 2, path: set below}
train: {steps: 1, batch: 1, eval_every: 0, checkpoint_every: 0}
replicated: [tokenizer]
output_dir: unused
)";
  config::AppConfig cfg =
      config::parse_app_config(config::parse_yaml(y, "<test>"), config::App::vqgpt);
  cfg.data.path = dir + "/images";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const std::string ck = vqgpt::train_quick_tokenizer(cfg, 1, dir + "/tok", comm, true);
    std::ifstream meta(ck + "/meta.json");
    const config::AppConfig saved = config::parse_app_config(
        config::parse_yaml(nlohmann::json::parse(meta).value("config_yaml", "")),
        config::App::vqtok);
    EXPECT_EQ(saved.train.batch, 1);
  });
  fs::remove_all(dir);
}

}  // namespace
