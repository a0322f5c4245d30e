// StepLog: a training loop's losses and gradient norms stay where they were computed until
// the loop settles (one read), and the non-finite policy acts then: it names the step that
// went wrong, not the step that found it, picks the earliest step over ranks, tells the
// input, the terms and their weighted sum apart, and lets fp16's skipped steps pass (an
// engine's real overflow too). And the vqtok loop reads back only at the steps that need
// it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "apps/app_test_util.h"
#include "apps/common/step_log.h"
#include "apps/common/window_stats.h"
#include "apps/vqgpt_test_util.h"
#include "common/test_util.h"
#include "nn/linear.h"
#include "zero/comm/launch.h"

using namespace zt;

namespace {

const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

std::vector<app::StepLog::Term> terms() {
  return {{"loss", ""}, {"mse", "mse (output vs. input)"}, {"vq", "vq term"}};
}

// One micro-batch's values as the loops hold them: 0-dim tensors, f32 and bf16.
std::vector<Tensor> values(double loss, double mse, double vq) {
  return {scalar_tensor(loss), scalar_tensor(mse, DType::f64), scalar_tensor(vq, DType::bf16)};
}

// f() on a fresh one-rank (or `ranks`-rank) engine with `cfg`.
void with_engine(int ranks, const std::function<void(zero::Engine&)>& f,
                 const zero::Config& cfg = {}) {
  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    zero::Engine engine(std::make_shared<nn::Linear>(4, 3), comm, cfg, {});
    f(engine);
  });
}

using test::error_of;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(StepLog, RowsComeBackInOrderFromOneRead) {
  with_engine(1, [](zero::Engine& engine) {
    app::StepLog log(terms(), "test");
    EXPECT_TRUE(log.settle(engine, 0).empty());
    EXPECT_EQ(log.reads(), 0) << "an empty log reads nothing";
    for (int64_t step = 1; step <= 3; ++step)
      for (int64_t k = 0; k < 2; ++k)
        log.add(step, k, values(static_cast<double>(step) + 0.25 * k, 0.5, 2.0), ones({2, 3}));
    const std::vector<app::StepLog::Row> rows = log.settle(engine, 3);
    EXPECT_EQ(log.reads(), 1);
    ASSERT_EQ(rows.size(), 6u);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].step, static_cast<int64_t>(i / 2 + 1));
      EXPECT_EQ(rows[i].micro, static_cast<int64_t>(i % 2));
      EXPECT_EQ(rows[i].values,
                (std::vector<double>{static_cast<double>(i / 2 + 1) + 0.25 * (i % 2), 0.5, 2.0}));
      EXPECT_TRUE(rows[i].finite());
    }
    EXPECT_TRUE(log.settle(engine, 3).empty()) << "settled rows are gone";
    EXPECT_EQ(log.reads(), 1);
    for (size_t i = 0; i < app::StepLog::kMaxPending; ++i) {
      EXPECT_FALSE(log.full());
      log.add(4, static_cast<int64_t>(i), values(1.0, 0.5, 2.0));
    }
    EXPECT_TRUE(log.full()) << "a loop settles then, whatever its log interval";
    EXPECT_EQ(log.settle(engine, 4).size(), app::StepLog::kMaxPending);
    EXPECT_FALSE(log.full());
    EXPECT_EQ(log.reads(), 2);
    EXPECT_TRUE(test::throws_with([&] { log.add(5, 0, {scalar_tensor(1.0)}); },
                                  "test: a micro-batch logs 3 values, got 1"));
  });
}

// A loop that settles at step 4 learns then that step 2 went wrong, and says both.
TEST(StepLog, ANonFiniteLossNamesItsStepMicroBatchAndTerm) {
  with_engine(1, [](zero::Engine& engine) {
    app::StepLog log(terms(), "vqtok train");
    log.add(1, 0, values(1.0, 0.5, 0.1));
    log.add(2, 0, values(1.0, 0.5, 0.1));
    log.add(2, 1, values(kNaN, kInf, 0.1), ones({2}));
    log.add(3, 0, values(kNaN, 0.5, kNaN));  // later: not the one named
    const std::string err = error_of([&] { (void)log.settle(engine, 4); });
    for (const char* part :
         {"vqtok train: the loss is not finite at step 2 on rank 0: loss nan in micro-batch 1; "
          "non-finite loss terms: mse (output vs. input)",
          "Training stops here (at step 4, the first after it to read the losses back",
          "no checkpoint of step 2 or later is written", "lower train.lr"})
      EXPECT_TRUE(has(err, part)) << part << " not in: " << err;
  });
}

TEST(StepLog, TheReportTellsBadInputAndABadWeightedSumApart) {
  with_engine(1, [](zero::Engine& engine) {
    app::StepLog log(terms(), "test");
    Tensor input = ones({4});
    input.narrow(0, 2, 1).fill_(kInf);
    log.add(1, 0, values(kNaN, kNaN, kNaN), input);
    std::string err = error_of([&] { (void)log.settle(engine, 1); });
    EXPECT_TRUE(has(err, "the input batch holds non-finite values")) << err;
    EXPECT_FALSE(has(err, "(at step")) << "found at the step it happened: " << err;
    log.add(2, 0, values(kInf, 1e30, 1e30), ones({4}));
    err = error_of([&] { (void)log.settle(engine, 2); });
    EXPECT_TRUE(has(err, "every loss term is finite but their weighted sum is not")) << err;
  });
}

// A term without an `about` (vqtok's vq term, the sum of the commitment and codebook terms,
// which are named on their own) is left out of the report's list.
TEST(StepLog, TheReportListsOnlyTheTermsThatNameACause) {
  with_engine(1, [](zero::Engine& engine) {
    app::StepLog log({{"loss", ""}, {"mse", "mse (output vs. input)"}, {"vq", ""}}, "test");
    log.add(1, 0, values(kNaN, kInf, kNaN));
    const std::string err = error_of([&] { (void)log.settle(engine, 1); });
    EXPECT_TRUE(has(err, "non-finite loss terms: mse (output vs. input). Training stops")) << err;
  });
}

TEST(StepLog, ANonFiniteGradientNormBehindFiniteLossesIsAnError) {
  with_engine(1, [](zero::Engine& engine) {
    app::StepLog log(terms(), "test");
    log.add(1, 0, values(1.0, 0.5, 0.1));
    log.add_norm(1, scalar_tensor(2.0, DType::f64));
    log.add(2, 0, values(1.0, 0.5, 0.1));
    log.add_norm(2, scalar_tensor(kInf, DType::f64));
    log.add(3, 0, values(1.0, 0.5, 0.1));
    log.add_norm(3, scalar_tensor(kNaN, DType::f64));  // later: not the one named
    const std::string err = error_of([&] { (void)log.settle(engine, 3); });
    EXPECT_TRUE(has(err, "the gradient norm is inf at step 2 while every loss was finite")) << err;
    EXPECT_TRUE(has(err, "no checkpoint of step 2 or later")) << err;
    // A non-finite loss at the same step is the cause: it is the one named.
    log.add(5, 0, values(kNaN, kNaN, 0.1));
    log.add_norm(5, scalar_tensor(kNaN, DType::f64));
    EXPECT_TRUE(
        has(error_of([&] { (void)log.settle(engine, 5); }), "the loss is not finite at step 5"));
  });
}

TEST(StepLog, EveryRankNamesTheEarliestStepOfAnyRank) {
  std::string errs[2];
  with_engine(2, [&](zero::Engine& engine) {
    const int r = engine.comm().rank();
    app::StepLog log(terms(), "test");
    for (int64_t step = 1; step <= 3; ++step) {
      const bool bad = (r == 1 && step == 2) || (r == 0 && step == 3);
      log.add(step, 0, values(bad ? kNaN : 1.0, bad ? kNaN : 0.5, 0.1));
    }
    errs[r] = error_of([&] { (void)log.settle(engine, 3); });
  });
  for (const std::string& e : errs)
    EXPECT_TRUE(has(e, "the loss is not finite at step 2 on rank 1")) << e;
}

TEST(StepLog, Fp16SkippedStepsComeBackMarkedAndTrainingGoesOn) {
  zero::Config cfg;
  cfg.precision.fp16 = true;
  with_engine(
      1,
      [](zero::Engine& engine) {
        app::StepLog log(terms(), "test");
        log.add(1, 0, values(kInf, 0.5, 0.1));
        log.add(1, 1, values(1.5, 0.5, 0.1));
        log.add_norm(1, scalar_tensor(kNaN, DType::f64));
        std::vector<app::StepLog::Row> rows;
        EXPECT_EQ(error_of([&] { rows = log.settle(engine, 1); }), "");
        ASSERT_EQ(rows.size(), 2u);
        EXPECT_FALSE(rows[0].finite());
        EXPECT_TRUE(rows[1].finite());
      },
      cfg);
}

// Under fp16 the engine skips an update whose gradients overflowed, whatever the scale: a
// fixed scale of 1 (or a dynamic one down at min_loss_scale) too. The run goes on then.
TEST(StepLog, AnFp16OverflowTheEngineSkippedDoesNotStopTheRun) {
  comm::run_threads(1, [&](comm::Communicator& comm) {
    manual_seed(3);
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.loss_scale = 1;  // fixed: the scale is 1 before and after the overflow
    zero::Engine engine(std::make_shared<nn::Linear>(4, 3), comm, cfg, {});
    // Outputs |w x| < 2e4 fit in f16; the weights' gradients, ~ (w x) x ~ 1e8, do not.
    const Tensor y = engine(mul(ones({2, 4}), 1e4).to(DType::f16)).to(DType::f32);
    engine.backward(mean(mul(y, y)));
    EXPECT_FALSE(engine.step()) << "the overflowed update is skipped";
    EXPECT_EQ(engine.stats().overflow_skips, 1);
    EXPECT_EQ(engine.loss_scale(), 1.0);
    EXPECT_FALSE(std::isfinite(engine.last_grad_norm()));
    app::StepLog log({{"loss", ""}}, "test");
    log.add(1, 0, {scalar_tensor(1.0)});
    log.add_norm(1, engine.last_grad_norm_tensor());
    EXPECT_EQ(error_of([&] { (void)log.settle(engine, 1); }), "")
        << "the skipped step stopped the run";
  });
}

// The vqtok loop reads its losses back after the first step, at log steps and before
// checkpoints: 7 steps logged every 3 with checkpoints every 2 settle after steps 1, 2, 3,
// 4, 6 and 7 (step 6's checkpoint finds nothing new after its log).
TEST(StepLog, TheVqtokLoopReadsBackOnlyWhereItLogsOrSaves) {
  const std::string dir = apptest::fresh_dir("zt_steplog", "vqtok");
  const vqtok::TrainResult r = apptest::train_vqtok(apptest::tiny_vqtok_config(
      dir, {"train.steps=7", "train.log_every=3", "train.checkpoint_every=2", "train.eval_every=0",
            "train.keep_checkpoints=0"}));
  EXPECT_EQ(r.steps, 7);
  EXPECT_EQ(r.log_steps, (std::vector<double>{3, 6, 7}));
  EXPECT_EQ(r.loss_reads, 6);
  std::filesystem::remove_all(dir);
}

// vqgpt's loop alike: 5 steps logged every 3 log steps 3 and 5, the last one ending a short
// window; it reads back after steps 1, 3 and 5.
TEST(StepLog, TheVqgptLoopLogsItsLastStepAndReadsBackOnlyWhereItLogs) {
  const std::string dir = apptest::fresh_dir("zt_steplog", "vqgpt");
  std::filesystem::create_directories(dir);
  const config::AppConfig cfg = vqgpt_test::tiny_config(dir, "", {"train.log_every=3"});
  const std::vector<vqgpt::TrainResult> r =
      apptest::train_vqgpt_with_fresh_tokenizer(cfg, dir + "/tokenizer.safetensors", 1);
  EXPECT_EQ(r[0].steps, 5);
  EXPECT_EQ(r[0].log_steps, (std::vector<double>{3, 5}));
  EXPECT_EQ(r[0].loss_reads, 3);
  std::filesystem::remove_all(dir);
}

// The ETA counts the time between steps too (evaluations, checkpoints): 2 steps of about
// 10 ms with 60 ms of other work between them take about 40 ms each, not 10.
TEST(StepTimer, TheEtaCountsTheTimeBetweenSteps) {
  zt::app::StepTimer t;
  EXPECT_EQ(t.eta(5), 0.0) << "no step yet";
  for (int i = 0; i < 2; ++i) {
    t.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    t.stop();
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  EXPECT_GE(t.eta(10), 10 * 0.040) << "the pace of the run, gaps included";
}
