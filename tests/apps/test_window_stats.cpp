// What a log line's window statistics add up to (apps/common/window_stats.h): a scalar's
// mean weighs each value by the count it was added with, over every rank; a window and
// the step timer's window start empty after each read; and the edge values a log prints
// (a perfect reconstruction's PSNR, the perplexity of a window without tokens).
#include "apps/common/window_stats.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "zero/comm/thread_comm.h"

using namespace zt;

// A value added with a count is a sum over that many items: rank 0's 3 items summing to 6
// and rank 1's one item of 2 have a mean of 8 / 4, not of the two sums.
TEST(WindowStats, AScalarsMeanWeighsEachSumByItsCount) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    app::ScalarWindow w;
    if (comm.rank() == 0)
      w.add("loss", 6.0, 3.0);
    else
      w.add("loss", 2.0, 1.0);
    const auto m = w.reduce(comm);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_DOUBLE_EQ(m[0].second, 2.0);
  });
}

// A window of no tokens (every micro-batch of the window skipped) used no code and has
// perplexity 0, not exp(0) = 1; an exact reconstruction's PSNR is capped at 99 dB.
TEST(WindowStats, AnEmptyCodebookWindowAndAPerfectReconstructionHaveTheirOwnValues) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    app::CodebookUsage u(4);
    const app::CodebookStats s = u.reduce(comm);
    EXPECT_EQ(s.tokens, 0);
    EXPECT_EQ(s.used, 0);
    EXPECT_EQ(s.usage, 0.0);
    EXPECT_EQ(s.perplexity, 0.0);
  });
  EXPECT_EQ(app::psnr_from_mse(0.0), 99.0);
  EXPECT_NEAR(app::psnr_from_mse(4.0), 0.0, 1e-12);
}

// The cap holds for an error short of exact too: a reconstruction off by 1e-6 per element
// (mse 1e-12, 126 dB uncapped) scored above an exact one, and a window's mean PSNR mixed
// such values with the 99 of its exact steps.
TEST(WindowStats, NoReconstructionScoresAboveAnExactOne) {
  for (const double mse : {1e-12, 1e-20, 4e-10, 1e-300, 5e-324})
    EXPECT_LE(app::psnr_from_mse(mse), app::psnr_from_mse(0.0)) << "mse " << mse;
  EXPECT_NEAR(app::psnr_from_mse(4e-9), 90.0, 1e-9) << "below the cap, the formula's value";
}

// window_mean() is the mean of the steps since the last call, then starts over; run_mean()
// keeps every step.
TEST(WindowStats, TheStepTimersWindowStartsOverAfterEachRead) {
  app::StepTimer t;
  t.start();
  const double first = t.stop();
  EXPECT_EQ(t.window_mean(), first);
  EXPECT_EQ(t.window_mean(), 0.0) << "no step since the last read";
  t.start();
  const double second = t.stop();
  EXPECT_EQ(t.window_mean(), second);
  EXPECT_DOUBLE_EQ(t.run_mean(), (first + second) / 2);
}
