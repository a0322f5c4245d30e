// Training progress on stdout: a bar redrawn on a terminal, plain lines elsewhere, and the
// short notes a run prints.
#pragma once

#include <cstdint>
#include <string>

namespace zt::app {

/// "45s", "3m05s", "1h02m".
std::string format_duration(double seconds);
/// True when stdout is a terminal.
bool stdout_is_tty();
/// Says (stdout) that a run resumed at step `start` >= train.steps has nothing to train.
void say_nothing_to_train(const char* app, int64_t start, int64_t steps);

/// Training progress on stdout. On a terminal, update() redraws one line ("\r") with a
/// bar; elsewhere update() prints nothing and log lines carry the progress. The bar shows
/// what the caller passes: label a last-step value as such ("step loss") next to the log
/// lines' window means, and show measured statistics only once measured.
class Progress {
 public:
  /// `tty`: stdout is a terminal (stdout_is_tty()); ignored under mpirun, whose ranks
  /// write plain lines (no "\r" or escape codes in a log file).
  Progress(int64_t total_steps, bool tty);
  /// Redraws the bar for `step` (steps done) with `stats` after it (terminal only).
  void update(int64_t step, const std::string& stats);
  /// Prints a whole line (clearing the bar first on a terminal; it is redrawn by the next
  /// update()).
  void line(const std::string& text);
  /// Ends the bar line.
  void finish();
  bool tty() const { return tty_; }

 private:
  int64_t total_;
  bool tty_;
  bool drawn_ = false;
};

}  // namespace zt::app
