// What a resume goes on with (thread ranks, the tiny vqtok model of test_vqtok_app.cpp).
// What these tests pin down:
//  1. resuming from the checkpoint of every step of a short run (dead-code restarts in
//     between) ends bit for bit where the uninterrupted run ends;
//  2. a resume at another world size or batch size reads on after the samples already read.
// How --resume meets damaged folders and earlier runs: test_reliability.cpp.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "apps/common/resume_data.h"
#include "apps/reliability_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "data/factory.h"
#include "zero/checkpoint.h"

using namespace zt;
using namespace zt::reltest;
namespace fs = std::filesystem;

TEST(ResumeIdentity, ResumingAtEveryStepIsBitIdentical) {
  // Dead-code restarts every 2 steps, a checkpoint every step: steps 1 and 3 are saved
  // with code counts pending, which the resumed run must continue; dropout draws from each
  // rank's random stream, which it must continue too.
  const std::vector<std::string> sets = {"train.steps=4", "train.checkpoint_every=1",
                                         "train.codebook_restart_every=2", "model.dropout=0.2"};
  const std::string full = fresh_dir("bits_full");
  apptest::train_vqtok(tiny_config(full, sets), false);
  const auto want = lines(full + "/metrics.jsonl");
  const nlohmann::json final_files =
      nlohmann::json::parse(std::ifstream(full + "/checkpoints/step_000004/meta.json"))["files"];
  for (int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("resumed at step " + std::to_string(k));
    const std::string dir = fresh_dir("bits_resume");
    const std::string tag = zero::checkpoint_tag(k);
    fs::create_directories(dir + "/checkpoints");
    fs::copy(full + "/checkpoints/" + tag, dir + "/checkpoints/" + tag);
    write_file(dir + "/checkpoints/latest", tag + "\n");
    const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, sets), true);
    EXPECT_EQ(r.start_step, k);
    // Every parameter, master, optimizer moment, buffer and code count, by digest.
    const nlohmann::json files =
        nlohmann::json::parse(std::ifstream(dir + "/checkpoints/step_000004/meta.json"))["files"];
    EXPECT_EQ(files, final_files);
    // The metrics of the steps it trained: the same losses to the last bit.
    const auto got = lines(dir + "/metrics.jsonl");
    for (int64_t s = k + 1; s <= 4; ++s) {
      const auto a = nlohmann::json::parse(line_of_step(got, s));
      const auto b = nlohmann::json::parse(line_of_step(want, s));
      for (const char* key : {"loss", "mse", "vq", "codes_used", "grad_norm"})
        EXPECT_EQ(a[key], b[key]) << key << " at step " << s;
    }
    fs::remove_all(dir);
  }
  fs::remove_all(full);
}

// An epoch's samples form one global order that the ranks deal out round-robin, so a
// resume at another world size or batch goes on after as many samples as the saved run
// had read (rounded down to a whole batch of the new run, with a note).
TEST(ResumeIdentity, ResumingAtAnotherWorldSizeGoesOnAfterTheSamplesAlreadyRead) {
  const std::string dir = fresh_dir("reshape");
  apptest::train_vqtok(tiny_config(dir, {"train.steps=2", "train.batch=4"}),
                       false);  // 2 ranks: 16 read
  auto loader_at = [&](int64_t step) {
    return nlohmann::json::parse(
        std::ifstream(dir + "/checkpoints/" + zero::checkpoint_tag(step) + "/meta.json"))["loader"];
  };
  EXPECT_EQ(loader_at(2),
            (nlohmann::json{{"epoch", 0}, {"position", 2}, {"batch", 4}, {"dataset_size", 64}}));
  // 1 rank x batch 8: sample 16 is step 2; one step later the stream is at 3.
  const auto sets = [](int steps, int batch) {
    return std::vector<std::string>{"train.steps=" + std::to_string(steps),
                                    "train.batch=" + std::to_string(batch),
                                    "train.checkpoint_every=1"};
  };
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, sets(3, 8)), true, 1).start_step, 2);
  EXPECT_EQ(loader_at(3),
            (nlohmann::json{{"epoch", 0}, {"position", 3}, {"batch", 8}, {"dataset_size", 64}}));
  // From there (24 samples) at 3 ranks x batch 4, 12 a step: step 2, then 3.
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, sets(4, 4)), true, 3).start_step, 3);
  EXPECT_EQ(loader_at(4),
            (nlohmann::json{{"epoch", 0}, {"position", 3}, {"batch", 4}, {"dataset_size", 64}}));

  // The note the resumed run prints says where it goes on and what it reads again.
  config::AppConfig cfg = tiny_config(dir, {"train.batch=4"});
  auto loader = data::make_loader(data::make_dataset(cfg.data), cfg.data, 4, 0, 2);
  zero::CheckpointExtra saved;
  saved.loader_position = 5;
  saved.loader_batch = 2;
  saved.saved_world_size = 3;  // 30 samples; 2 ranks x batch 4 go on at 24
  const std::string note = app::resume_data(*loader, saved);
  EXPECT_EQ(loader->state(), (data::LoaderState{0, 3}));
  EXPECT_TRUE(has(note, "at sample 30 of epoch 0 (3 ranks x batch 2)")) << note;
  EXPECT_TRUE(has(note, "goes on at sample 24 of epoch 0, reading 6 samples again")) << note;
  // Past the end of this run's epoch (of 18 samples 2 ranks x batch 4 read 16 an epoch,
  // 1 rank x batch 1 all 18): it goes on with the next epoch and says what it leaves.
  config::AppConfig small = tiny_config(dir, {"train.batch=4", "data.num_samples=18"});
  auto short_loader = data::make_loader(data::make_dataset(small.data), small.data, 4, 0, 2);
  zero::CheckpointExtra past;
  past.loader_position = 16;
  past.loader_batch = 1;
  past.saved_world_size = 1;
  const std::string next = app::resume_data(*short_loader, past);
  EXPECT_EQ(short_loader->state(), (data::LoaderState{1, 0}));
  EXPECT_TRUE(has(next, "with epoch 1, leaving the last 2 samples of epoch 0 unread")) << next;
  // A data set of another size than the checkpoint's: its shuffle is another, and the
  // note says what that means for the epoch under way.
  zero::CheckpointExtra grown = past;
  grown.loader_position = 4;
  grown.loader_batch = 4;
  grown.saved_world_size = 2;
  grown.loader_dataset_size = 16;
  const std::string other = app::resume_data(*short_loader, grown);
  EXPECT_TRUE(has(other,
                  "the data set holds 18 items, not the 16 it held when the checkpoint "
                  "was saved: the rest of epoch 0 follows another shuffle"))
      << other;
  // What the saved layout left unread is counted over the data set it read: 20 ranks,
  // more than this data set holds, at sample 20 of an epoch of 40 leave 20.
  zero::CheckpointExtra wide = past;
  wide.loader_position = 1;
  wide.saved_world_size = 20;
  wide.loader_dataset_size = 40;
  const std::string unread = app::resume_data(*short_loader, wide);
  EXPECT_TRUE(has(unread, "with epoch 1, leaving the last 20 samples of epoch 0 unread")) << unread;
  fs::remove_all(dir);
}
