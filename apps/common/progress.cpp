// The progress display and the duration format it shows.
#include "apps/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "zero/comm/launch.h"

namespace zt::app {

void say_nothing_to_train(const char* app, int64_t start, int64_t steps) {
  std::printf(
      "%s: nothing to train: the run is at step %lld and train.steps is %lld (raise "
      "train.steps to train further)\n",
      app, static_cast<long long>(start), static_cast<long long>(steps));
  std::fflush(stdout);
}

std::string format_duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60)  // rounded first: 59.6 s is "1m00s", not "60s"
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  return buf;
}

bool stdout_is_tty() {
  return ::isatty(STDOUT_FILENO) == 1;
}

Progress::Progress(int64_t total_steps, bool tty)
    : total_(std::max<int64_t>(1, total_steps)), tty_(tty && !comm::under_mpirun()) {}

void Progress::update(int64_t step, const std::string& stats) {
  if (!tty_) return;
  constexpr int kWidth = 24;
  const double frac = std::clamp(static_cast<double>(step) / static_cast<double>(total_), 0.0, 1.0);
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(kWidth - filled), '.');
  std::printf("\r\033[K[%s] %3.0f%% %s", bar.c_str(), frac * 100.0, stats.c_str());
  std::fflush(stdout);
  drawn_ = true;
}

void Progress::line(const std::string& text) {
  if (tty_ && drawn_) std::printf("\r\033[K");
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  drawn_ = false;
}

void Progress::finish() {
  if (tty_ && drawn_) std::printf("\n");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace zt::app
