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
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  // In double throughout: the ETA of a run of --steps near 2^63 passes 2^63 seconds, which
  // no int64 holds (the conversion is undefined; it printed "eta -9223372036854775808s").
  const double s = std::floor(seconds + 0.5);  // rounded first: 59.6 s is "1m00s", not "60s"
  char buf[320];  // the hours of any finite double (DBL_MAX / 3600 has 305 digits)
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%.0fm%02.0fs", std::floor(s / 60), std::fmod(s, 60));
  else
    std::snprintf(buf, sizeof buf, "%.0fh%02.0fm", std::floor(s / 3600),
                  std::floor(std::fmod(s, 3600) / 60));
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
