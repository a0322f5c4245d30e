// The training progress display as a log reader meets it: a bar that redraws ("\r",
// ESC[K) only on a terminal and never under mpirun (a rank's stdout can be a
// pseudo-terminal while mpirun writes to a file), plain lines everywhere.
#include <cmath>
#include <cstdlib>

#include "apps/common/train_util.h"
#include "common/test_util.h"

using namespace zt;

namespace {
// Everything `fn` prints on stdout.
template <typename Fn>
std::string printed(Fn&& fn) {
  ::testing::internal::CaptureStdout();
  fn();
  return ::testing::internal::GetCapturedStdout();
}

bool has_control_codes(const std::string& s) {
  return s.find('\r') != std::string::npos || s.find('\033') != std::string::npos;
}
}  // namespace

TEST(Progress, TerminalRedrawsTheBar) {
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  app::Progress p(10, /*tty=*/true);
  ASSERT_TRUE(p.tty());
  const std::string out = printed([&] {
    p.update(5, "step 5/10 | step loss 0.5");
    p.line("step 5/10 | mean loss 0.6");
    p.finish();
  });
  EXPECT_TRUE(has_control_codes(out)) << out;
  EXPECT_NE(out.find("step loss 0.5"), std::string::npos) << out;
  EXPECT_NE(out.find("mean loss 0.6\n"), std::string::npos) << out;
}

TEST(Progress, UnderMpirunOnlyPlainLines) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);  // what mpirun sets for each rank
  app::Progress p(10, /*tty=*/true);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_FALSE(p.tty()) << "a bar under mpirun";
  const std::string out = printed([&] {
    p.update(5, "step 5/10 | step loss 0.5");
    p.line("step 5/10 | mean loss 0.6");
    p.finish();
  });
  EXPECT_FALSE(has_control_codes(out)) << out;
  EXPECT_EQ(out, "step 5/10 | mean loss 0.6\n");
}

TEST(Progress, NoTerminalOnlyPlainLines) {
  app::Progress p(10, /*tty=*/false);
  const std::string out = printed([&] {
    p.update(1, "step 1/10");
    p.line("checkpoint runs/x/step_1");
    p.finish();
  });
  EXPECT_EQ(out, "checkpoint runs/x/step_1\n");
}

TEST(Progress, DurationsRoundOnce) {
  // Rounded to whole seconds before the unit is chosen: 59.6 s is a minute.
  EXPECT_EQ(app::format_duration(12.4), "12s");
  EXPECT_EQ(app::format_duration(59.6), "1m00s");
  EXPECT_EQ(app::format_duration(3599.6), "1h00m");
  EXPECT_EQ(app::format_duration(150), "2m30s");
  EXPECT_EQ(app::format_duration(5400), "1h30m");
  EXPECT_EQ(app::format_duration(-1), "?");
}

// The ETA of a run of --steps near 2^63 (which the option takes) at a second or more a step
// passes 2^63 seconds: still hours and minutes, not a wrapped negative count of seconds.
TEST(Progress, AnEtaPastWhatInt64HoldsIsStillHours) {
  EXPECT_EQ(app::format_duration(std::ldexp(1.0, 63)), "2562047788015215h30m");  // 2^63 s
  EXPECT_EQ(app::format_duration(std::ldexp(1.0, 64)), "5124095576030431h00m");
}

// On a terminal the bar is 24 cells, filled for the share of steps done, then the percentage
// and the stats; a line or the end clears or closes only a bar that was drawn.
TEST(Progress, TheBarFillsForTheShareOfStepsDone) {
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  app::Progress p(8, /*tty=*/true);
  EXPECT_EQ(printed([&] { p.update(2, "step 2/8"); }),
            "\r\033[K[######..................]  25% step 2/8");
  EXPECT_EQ(printed([&] { p.line("checkpoint"); }), "\r\033[Kcheckpoint\n");
  EXPECT_EQ(printed([&] { p.line("eval"); }), "eval\n") << "no bar to clear";
  EXPECT_EQ(printed([&] { p.finish(); }), "") << "no bar to close";
  printed([&] { p.update(8, ""); });
  EXPECT_EQ(printed([&] { p.finish(); }), "\n");
}
