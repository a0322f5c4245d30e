// RunCheckpoints: a run saves every train.checkpoint_every steps and at its last step; a
// stop signal after any step but the last ends the run there with that step's checkpoint.
// A run resumed with no step left to train reports the checkpoint it stands at.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/app_test_util.h"
#include "apps/common/run_checkpoints.h"
#include "apps/common/stop_signal.h"
#include "zero/comm/thread_comm.h"

namespace zt {
namespace {

// The steps a 5-step run saves, every 2 steps, with a SIGTERM raised during step
// `signal_at` (0: none); `stopped` gets the step the run stopped after (0: none).
std::vector<int64_t> saves_of_run(int64_t signal_at, int64_t& stopped) {
  config::TrainConfig tc;
  tc.steps = 5;
  tc.checkpoint_every = 2;
  std::vector<int64_t> saved;
  stopped = 0;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    app::StopOnSignal on_signal;
    app::RunCheckpoints checkpoints(tc, [&](int64_t step) {
      saved.push_back(step);
      return "step_" + std::to_string(step);
    });
    for (int64_t done = 1; done <= tc.steps; ++done) {
      if (done == signal_at) std::raise(SIGTERM);
      checkpoints.signalled(done, comm);
      if (checkpoints.stop_after(done)) {
        stopped = done;
        break;
      }
    }
    checkpoints.finish(0, "");
    EXPECT_EQ(checkpoints.stopped_by(), stopped > 0 ? SIGTERM : 0);
  });
  return saved;
}

TEST(RunCheckpoints, ARunSavesOnItsCadenceAndAtItsLastStep) {
  int64_t stopped = 0;
  EXPECT_EQ(saves_of_run(0, stopped), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(stopped, 0);
}

TEST(RunCheckpoints, ASignalBeforeTheLastStepStopsAfterItsStepWithACheckpoint) {
  int64_t stopped = 0;
  EXPECT_EQ(saves_of_run(3, stopped), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(stopped, 3);
  EXPECT_EQ(saves_of_run(4, stopped), (std::vector<int64_t>{2, 4}));  // saved once
  EXPECT_EQ(stopped, 4);
  // At the last step the run ends as usual.
  EXPECT_EQ(saves_of_run(5, stopped), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(stopped, 0);
}

TEST(RunCheckpoints, ARunResumedAtItsEndReportsTheCheckpointItStandsAt) {
  const std::string dir = apptest::fresh_dir("zt_run_checkpoints", "end");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      dir, {"train.steps=2", "train.eval_every=0", "train.checkpoint_every=1"});
  const vqtok::TrainResult first = apptest::train_vqtok(cfg, false, 1);
  EXPECT_EQ(std::filesystem::path(first.final_checkpoint).filename(), "step_000002");
  const vqtok::TrainResult again = apptest::train_vqtok(cfg, /*resume=*/true, 1);
  EXPECT_EQ(again.start_step, 2);
  EXPECT_EQ(again.final_checkpoint, first.final_checkpoint);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zt
