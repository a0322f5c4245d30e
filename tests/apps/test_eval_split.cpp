// Which clips an evaluation scores: `vqtok eval` reads the split it is asked for (the
// training split's items or the eval split's), and a training run's evaluation of
// train.eval_batches batches scores the clips `vqtok eval --batches` scores, spread over
// the eval split rather than its first ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "apps/app_test_util.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "data/npy.h"

namespace fs = std::filesystem;
using namespace zt;

namespace {

// vqtok::evaluate on one thread rank.
vqtok::EvalResult evaluate_on_one_rank(const config::AppConfig& cfg, const vqtok::EvalOptions& o) {
  vqtok::EvalResult r;
  comm::run_threads(1, [&](comm::Communicator& comm) { r = vqtok::evaluate(cfg, o, comm); });
  return r;
}

}  // namespace

TEST(EvalSplit, EvalReadsTheSplitItIsAskedFor) {
  const std::string dir = apptest::fresh_dir("zt_eval_split", "split");
  const config::AppConfig cfg =  // 64 training clips, 8 eval clips
      apptest::tiny_vqtok_config(dir, {"train.steps=1", "train.eval_every=0"});
  apptest::train_vqtok(cfg, false, 1);
  vqtok::EvalOptions o;
  o.eval_split = false;
  EXPECT_EQ(evaluate_on_one_rank(cfg, o).clips, 64);
  o.eval_split = true;
  EXPECT_EQ(evaluate_on_one_rank(cfg, o).clips, 8);
  fs::remove_all(dir);
}

TEST(EvalSplit, ATrainingRunsEvaluationScoresTheClipsEvalBatchesScores) {
  const std::string dir = apptest::fresh_dir("zt_eval_split", "scored");
  fs::create_directories(dir);
  // 16 clips of noise, each of its own amplitude, so that two pairs of them score apart.
  Generator g(3);
  Tensor clips = rand({16, 4, 3, 16, 16}, g) * 2.0 - 1.0;
  for (int64_t i = 0; i < 16; ++i)
    mul_(clips.narrow(0, i, 1), 0.05 + 0.05 * static_cast<double>(i));
  data::save_npy(dir + "/clips.npy", clips);
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      dir + "/run", {"data.kind=npy", "data.path=" + dir + "/clips.npy", "train.steps=1",
                     "train.eval_every=1", "train.eval_batches=1", "train.checkpoint_every=1"});
  const vqtok::TrainResult trained = apptest::train_vqtok(cfg, false, 1);
  vqtok::EvalOptions o;
  o.batches = 1;
  const vqtok::EvalResult eval = evaluate_on_one_rank(cfg, o);
  EXPECT_EQ(eval.clips, 2);
  EXPECT_NEAR(trained.eval_psnr, eval.psnr, 1e-3);
  fs::remove_all(dir);
}
