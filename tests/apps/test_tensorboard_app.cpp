// train.tensorboard on vqtok: a 3-step run on 2 thread ranks writes one event file under
// <output_dir>/tb (rank 0 only) that the independent reader of
// tests/common/tfevents_reader.h parses: every numeric field of every metrics.jsonl
// record as a "<kind>/<field>" scalar at its step, and the eval reconstruction grid as a
// PNG image identical to recon_step_*.png. A run resumed from a checkpoint older than its
// last logged step shows in TensorBoard exactly what metrics.jsonl keeps.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "apps/common/train_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "common/tfevents_reader.h"
#include "configs/config.h"
#include "data/image.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

const char* kTinyYaml = R"(
model: {codebook_size: 64, embed_dim: 4, z_channels: 4, ch: 32, ch_mult: [1, 1, 1, 1],
        num_res_blocks: 1, attn_resolutions: [3], temporal_downsample_factor: 4}
data: {kind: synthetic, frames: 4, height: 16, width: 16, num_samples: 16, eval_samples: 4,
       seed: 7, workers: 1, prefetch: 1}
train: {steps: 3, batch: 2, lr: 3.0e-3, schedule: constant, warmup: 0, log_every: 1,
        eval_every: 3, eval_batches: 1, checkpoint_every: 0}
zero_optimization: {stage: 3}
output_dir: unset
)";

}  // namespace

TEST(TensorBoardApp, VqtokWritesScalarsAndReconGrid) {
  const fs::path out = fs::temp_directory_path() / ("zt_tb_vqtok_" + std::to_string(::getpid()));
  fs::remove_all(out);
  config::Node root = config::parse_yaml(kTinyYaml, "test_tensorboard_app");
  config::apply_override(root, "train.tensorboard=true");
  config::apply_override(root, "output_dir=" + out.string());
  const config::AppConfig cfg = config::parse_app_config(root, config::App::vqtok);
  ASSERT_TRUE(cfg.train.tensorboard);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(out / "tb")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << "rank 0 alone writes one event file";
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u);
  const auto events = test::read_events(files[0].string());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");

  // (tag, step) -> value, from the event file.
  std::map<std::pair<std::string, int64_t>, float> scalars;
  const test::TfValue* recon = nullptr;
  int64_t recon_step = -1;
  for (const test::TfEvent& e : events)
    for (const test::TfValue& v : e.values) {
      if (v.has_simple) scalars[{v.tag, e.step}] = v.simple;
      if (v.has_image) {
        recon = &v;
        recon_step = e.step;
      }
    }

  // Every numeric field of metrics.jsonl is there, with its value.
  const auto records = app::read_metrics((out / "metrics.jsonl").string());
  std::set<std::string> kinds;
  size_t checked = 0;
  for (const auto& r : records) {
    const std::string kind = r.at("kind").get<std::string>();
    kinds.insert(kind);
    const int64_t step = r.at("step").get<int64_t>();
    for (const auto& [k, v] : r.items()) {
      if (!v.is_number() || k == "step") continue;
      const auto it = scalars.find({kind + "/" + k, step});
      ASSERT_NE(it, scalars.end()) << kind << "/" << k << " at step " << step;
      EXPECT_EQ(it->second, static_cast<float>(v.get<double>())) << kind << "/" << k;
      ++checked;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"train", "eval"}));
  EXPECT_GT(checked, 3u * 10u);  // loss, psnr, lr, grad_norm, codebook_usage, ... per step
  for (const char* tag :
       {"train/loss", "train/psnr", "train/lr", "train/grad_norm", "train/codebook_usage"})
    for (int64_t step = 1; step <= 3; ++step)
      EXPECT_TRUE(scalars.count({tag, step})) << tag << " at step " << step;
  EXPECT_TRUE(scalars.count({"eval/psnr", 3}));

  // The reconstruction grid: the same pixels as the PNG next to metrics.jsonl.
  ASSERT_NE(recon, nullptr);
  EXPECT_EQ(recon->tag, "eval/recon");
  EXPECT_EQ(recon_step, 3);
  const data::Image file_grid = data::load_image((out / "recon_step_000003.png").string());
  const fs::path back = out / "tb_recon.png";
  {
    std::ofstream f(back, std::ios::binary);
    f.write(recon->encoded.data(), static_cast<std::streamsize>(recon->encoded.size()));
  }
  const data::Image tb_grid = data::load_image(back.string());
  EXPECT_EQ(recon->height, file_grid.height);
  EXPECT_EQ(recon->width, file_grid.width);
  EXPECT_EQ(recon->colorspace, 3);
  EXPECT_EQ(tb_grid.rgb, file_grid.rgb);
  fs::remove_all(out);
}

// The first run logs steps 1-3 and saves at 2 and 3; with the step-3 checkpoint gone, the
// resumed run starts again at step 3. Its event file starts with a session start at step 3,
// so TensorBoard (the reader's shown_events) drops the first run's step-3 points, and what
// it shows is what metrics.jsonl keeps: the first run's steps 1-2 and the second's step 3.
TEST(TensorBoardApp, ResumeShowsWhatMetricsKeeps) {
  const fs::path out = fs::temp_directory_path() / ("zt_tb_resume_" + std::to_string(::getpid()));
  fs::remove_all(out);
  config::Node root = config::parse_yaml(kTinyYaml, "test_tensorboard_app");
  for (const char* o : {"train.tensorboard=true", "train.checkpoint_every=2"})
    config::apply_override(root, o);
  config::apply_override(root, "output_dir=" + out.string());
  const config::AppConfig cfg = config::parse_app_config(root, config::App::vqtok);
  auto run = [&](bool resume) {
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.quiet = true;
      o.resume = resume;
      vqtok::train(cfg, o, comm);
    });
  };
  run(false);
  fs::remove_all(out / "checkpoints" / zero::checkpoint_tag(3));
  run(true);

  // Both event files, in the order they were written (the first event's wall time).
  std::vector<std::vector<test::TfEvent>> files;
  for (const auto& e : fs::directory_iterator(out / "tb"))
    files.push_back(test::read_events(e.path().string()));
  ASSERT_EQ(files.size(), 2u);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.at(0).wall_time < b.at(0).wall_time; });
  ASSERT_GE(files[1].size(), 2u);
  EXPECT_EQ(files[1][1].session_status, 1);
  EXPECT_EQ(files[1][1].step, 3);
  std::vector<test::TfEvent> all = files[0];
  all.insert(all.end(), files[1].begin(), files[1].end());

  std::map<std::pair<std::string, int64_t>, float> shown;
  int images = 0;
  for (const test::TfEvent& e : test::shown_events(all))
    for (const test::TfValue& v : e.values) {
      if (v.has_simple) {
        EXPECT_TRUE(shown.emplace(std::pair{v.tag, e.step}, v.simple).second);
      }
      images += v.has_image ? 1 : 0;
    }
  EXPECT_EQ(images, 1) << "the first run's step-3 reconstruction grid is dropped";
  // metrics.jsonl's numeric fields, nested objects flattened with "/" as the writer does.
  std::map<std::pair<std::string, int64_t>, float> kept;
  std::function<void(const std::string&, int64_t, const nlohmann::json&)> keep =
      [&](const std::string& tag, int64_t step, const nlohmann::json& v) {
        if (v.is_object())
          for (const auto& [k, x] : v.items()) keep(tag + "/" + k, step, x);
        else if (v.is_number())
          kept[{tag, step}] = static_cast<float>(v.get<double>());
      };
  for (const auto& r : app::read_metrics((out / "metrics.jsonl").string()))
    for (const auto& [k, v] : r.items())
      if (k != "step") keep(r.at("kind").get<std::string>() + "/" + k, r.at("step"), v);
  EXPECT_GT(kept.size(), 3u * 10u);
  for (const auto& [key, value] : kept) {
    const auto it = shown.find(key);
    ASSERT_NE(it, shown.end()) << key.first << " at step " << key.second << " is not shown";
    EXPECT_EQ(it->second, value) << key.first << " at step " << key.second;
  }
  for (const auto& [key, value] : shown)
    EXPECT_TRUE(kept.count(key)) << key.first << " at step " << key.second << " is not kept";
  fs::remove_all(out);
}
