// A run's training settings as the engine gets them: LrPlan's rate at each update (after
// the linear warmup, cosine and linear schedules fall from train.lr to train.min_lr, the
// floor they end at, not to 0), and optimizer_config's copy of train's optimizer keys.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "apps/common/train_util.h"

namespace zt {
namespace {

config::TrainConfig schedule_config(config::Schedule schedule) {
  config::TrainConfig tc;
  tc.lr = 1.0;
  tc.min_lr = 0.2;
  tc.warmup = 2;
  tc.steps = 12;
  tc.schedule = schedule;
  return tc;
}

TEST(LrPlan, CosineFallsFromTheRateToTheFloorAfterTheWarmup) {
  const app::LrPlan plan(schedule_config(config::Schedule::cosine));
  EXPECT_NEAR(plan.lr_at(0), 0.5, 1e-12);  // warmup: 1 / 2, 2 / 2
  EXPECT_NEAR(plan.lr_at(1), 1.0, 1e-12);
  EXPECT_NEAR(plan.lr_at(2), 1.0, 1e-12);  // the cosine's start
  EXPECT_NEAR(plan.lr_at(7), 0.6, 1e-12);  // halfway: (1 + 0.2) / 2
  const double last = 0.2 + 0.8 * 0.5 * (1.0 + std::cos(std::numbers::pi * 0.9));
  EXPECT_NEAR(plan.lr_at(11), last, 1e-12);
  EXPECT_NEAR(plan.lr_at(12), 0.2, 1e-12);  // past the run: the floor
}

TEST(LrPlan, LinearFallsFromTheRateToTheFloorAfterTheWarmup) {
  const app::LrPlan plan(schedule_config(config::Schedule::linear));
  EXPECT_NEAR(plan.lr_at(0), 0.5, 1e-12);
  EXPECT_NEAR(plan.lr_at(2), 1.0, 1e-12);
  EXPECT_NEAR(plan.lr_at(7), 0.6, 1e-12);  // 5 of the 10 updates after the warmup
  EXPECT_NEAR(plan.lr_at(12), 0.2, 1e-12);
  EXPECT_NEAR(plan.lr_at(20), 0.2, 1e-12);  // and stays there
}

TEST(OptimizerConfig, EachOfTrainsOptimizerKeysReachesItsOwnField) {
  config::TrainConfig tc;
  tc.optimizer = config::Optimizer::adam;
  tc.lr = 0.25;
  tc.betas = {0.8, 0.95};
  tc.eps = 1e-6;
  tc.weight_decay = 0.05;
  const zero::OptimizerConfig adam = app::optimizer_config(tc);
  EXPECT_EQ(adam.type, "adam");
  EXPECT_EQ(adam.lr, 0.25);
  EXPECT_EQ(adam.beta1, 0.8);
  EXPECT_EQ(adam.beta2, 0.95);
  EXPECT_EQ(adam.eps, 1e-6);
  EXPECT_EQ(adam.weight_decay, 0.05);

  tc.optimizer = config::Optimizer::sgd;
  tc.momentum = 0.9;
  tc.dampening = 0.1;
  const zero::OptimizerConfig sgd = app::optimizer_config(tc);
  EXPECT_EQ(sgd.type, "sgd");
  EXPECT_EQ(sgd.momentum, 0.9);
  EXPECT_EQ(sgd.dampening, 0.1);
}

}  // namespace
}  // namespace zt
