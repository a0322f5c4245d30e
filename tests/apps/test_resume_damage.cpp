// vqtok training over a checkpoint folder a failure left damaged (thread ranks, the tiny
// model of test_vqtok_app.cpp). What these tests pin down:
//  1. after a resume passed over a damaged newest checkpoint, saves with keep_checkpoints
//     keep the newest complete checkpoints and the damaged one (set aside), deleting
//     neither;
//  2. a newest checkpoint whose meta.json disagrees with its own world size (its digests
//     all match) is passed over by --resume like any damage, for the older good one;
//  3. an `output_dir/checkpoints` that is a file stops the run at start-up, naming it,
//     instead of at the first save.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/app_test_util.h"
#include "apps/common/run_checks.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_dir.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// The tiny config: `steps` steps, a checkpoint every 2 keeping `keep`, no eval.
config::AppConfig tiny_config(const std::string& out_dir, int steps, int keep) {
  return apptest::tiny_vqtok_config(
      out_dir, {"train.steps=" + std::to_string(steps), "train.eval_every=0",
                "train.checkpoint_every=2", "train.keep_checkpoints=" + std::to_string(keep)});
}

// The folders under `root`, a set-aside one's id left out ("step_000004.incomplete-*").
std::set<std::string> folders(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    const size_t aside = n.find(".incomplete-");
    if (e.is_directory())
      out.insert(aside == std::string::npos ? n : n.substr(0, aside + 12) + "*");
  }
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(ResumeDamage, SavesKeepTheNewestCompleteCheckpointsAndTheDamagedOne) {
  const std::string dir = apptest::fresh_dir("zt_damage", "keep");
  const std::string root = dir + "/checkpoints";
  apptest::train_vqtok(tiny_config(dir, 4, 0), false);  // checkpoints at steps 2 and 4
  fs::resize_file(root + "/step_000004/rank_00001.safetensors", 10);
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, 4, 2), true).start_step, 2);
  EXPECT_EQ(folders(root),
            (std::set<std::string>{"step_000002", "step_000004", "step_000004.incomplete-*"}));
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, 6, 2), true).start_step, 4);
  EXPECT_EQ(folders(root),
            (std::set<std::string>{"step_000004", "step_000006", "step_000004.incomplete-*"}));
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, 8, 2), true).start_step, 6);
  EXPECT_EQ(folders(root),
            (std::set<std::string>{"step_000006", "step_000008", "step_000004.incomplete-*"}));
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000006"));
  fs::remove_all(dir);
}

TEST(ResumeDamage, AMetaJsonWithTheWrongWorldSizeIsPassedOver) {
  const std::string dir = apptest::fresh_dir("zt_damage", "world");
  const std::string meta = dir + "/checkpoints/step_000004/meta.json";
  apptest::train_vqtok(tiny_config(dir, 4, 0), false);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(meta));
  m["world_size"] = 3;
  zero::ckpt::seal_meta(m);  // written so, not changed after: the layout check finds it
  std::ofstream(meta, std::ios::trunc) << m.dump(1);
  testing::internal::CaptureStderr();
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, 6, 0), true);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.steps, 6);
  EXPECT_TRUE(has(err, "'" + meta + "' has world_size 3 but lists 2 rank files")) << err;
  fs::remove_all(dir);
}

// meta.json carries a digest of itself: a counter changed after the save (the update count,
// which places the learning-rate schedule; the data position) is damage, and the resume
// takes the newest checkpoint whose meta.json matches, not a run moved in time.
TEST(ResumeDamage, AMetaJsonChangedAfterTheSaveIsPassedOver) {
  const std::string dir = apptest::fresh_dir("zt_damage", "meta_edit");
  const std::string meta = dir + "/checkpoints/step_000004/meta.json";
  apptest::train_vqtok(tiny_config(dir, 4, 0), false);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(meta));
  ASSERT_TRUE(m.contains("meta_digest"));
  m["optimizer_step"] = 7;
  m["loader"]["position"] = 9;
  std::ofstream(meta, std::ios::trunc) << m.dump(1);
  testing::internal::CaptureStderr();
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, 6, 0), true);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.start_step, 2);
  EXPECT_TRUE(has(err, "'" + meta +
                           "' does not match its meta_digest: it was changed after the "
                           "save"))
      << err;
  fs::remove_all(dir);
}

TEST(ResumeDamage, ACheckpointsPathThatIsAFileStopsTheStart) {
  const std::string dir = apptest::fresh_dir("zt_damage", "file");
  const std::string root = dir + "/checkpoints";
  fs::create_directories(dir);
  std::ofstream(root) << "not a folder\n";
  for (bool resume : {true, false}) {
    const std::string err =
        test::error_of([&] { apptest::train_vqtok(tiny_config(dir, 4, 0), resume); });
    EXPECT_TRUE(has(err, "vqtok train: '" + root +
                             "' is a file, not a folder, and this run "
                             "saves its checkpoints there"))
        << err;
  }
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl"));
  EXPECT_TRUE(fs::is_regular_file(root));
  fs::remove_all(dir);
}

// train.resume naming a checkpoint root reads it as --resume reads one: a damaged newest
// checkpoint is passed over for the newest complete one. Under the run's own root the
// damaged one is set aside (as --resume does), nothing deleted.
TEST(ResumeDamage, TrainResumeOfItsOwnRootPassesOverADamagedLatest) {
  const std::string dir = apptest::fresh_dir("zt_damage", "own_root");
  const std::string root = dir + "/checkpoints";
  apptest::train_vqtok(tiny_config(dir, 4, 0), false);  // checkpoints at steps 2 and 4
  fs::resize_file(root + "/step_000004/rank_00001.safetensors", 10);
  config::AppConfig cfg = tiny_config(dir, 6, 0);
  cfg.train.resume = root;
  testing::internal::CaptureStderr();
  const vqtok::TrainResult r = apptest::train_vqtok(cfg, false);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.steps, 6);
  EXPECT_TRUE(has(err, "taking the newest complete checkpoint")) << err;
  EXPECT_EQ(folders(root), (std::set<std::string>{"step_000002", "step_000004", "step_000006",
                                                  "step_000004.incomplete-*"}));
  fs::remove_all(dir);
}

// Another run's root: its newest complete checkpoint starts the run, and that run's folder
// is left as it was (this run holds no lock on it).
TEST(ResumeDamage, TrainResumeOfAnotherRunsRootPassesOverADamagedLatest) {
  const std::string from = apptest::fresh_dir("zt_damage", "from_root");
  const std::string dir = apptest::fresh_dir("zt_damage", "to_root");
  apptest::train_vqtok(tiny_config(from, 4, 0), false);
  fs::resize_file(from + "/checkpoints/step_000004/rank_00001.safetensors", 10);
  config::AppConfig cfg = tiny_config(dir, 6, 0);
  cfg.train.resume = from + "/checkpoints";
  testing::internal::CaptureStderr();
  const vqtok::TrainResult r = apptest::train_vqtok(cfg, false);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.start_step, 2);
  EXPECT_TRUE(has(err, "taking the newest complete checkpoint")) << err;
  EXPECT_EQ(folders(from + "/checkpoints"), (std::set<std::string>{"step_000002", "step_000004"}));
  EXPECT_EQ(folders(dir + "/checkpoints"), (std::set<std::string>{"step_000004", "step_000006"}));
  fs::remove_all(from);
  fs::remove_all(dir);
}
