// RunCheckpoints: when a training loop saves.
#include "apps/common/run_checkpoints.h"

#include <csignal>
#include <utility>

#include "apps/common/stop_signal.h"
#include "zero/checkpoint.h"

namespace zt::app {

RunCheckpoints::RunCheckpoints(const config::TrainConfig& tc,
                               std::function<std::string(int64_t)> save)
    : every_(tc.checkpoint_every), steps_(tc.steps), save_(std::move(save)) {}

void RunCheckpoints::save(int64_t step) {
  last_ = save_(step);
  last_step_ = step;
}

bool RunCheckpoints::signalled(int64_t done, comm::Communicator& comm) {
  const int signal = agreed_stop_signal(comm);
  if (signal == 0 || done >= steps_) return false;
  signal_ = signal;
  stopped_after_ = done;
  return true;
}

bool RunCheckpoints::stop_after(int64_t done) {
  if (on() && (done % every_ == 0 || done == steps_)) save(done);
  if (stopped_after_ != done) return false;
  if (on() && last_step_ != done) save(done);
  return true;
}

void RunCheckpoints::finish(int64_t start, const std::string& existing) {
  if (!on()) return;
  if (start >= steps_)
    last_ = zero::find_checkpoint(existing);
  else if (signal_ == 0 && last_step_ != steps_)
    save(steps_);
}

std::string RunCheckpoints::stopped_line(const char* app) const {
  const std::string name = signal_ == SIGINT    ? "SIGINT"
                           : signal_ == SIGTERM ? "SIGTERM"
                                                : "a signal";
  return std::string(app) + ": stopped by " + name + " after step " +
         std::to_string(stopped_after_) +
         (last_step_ == stopped_after_
              ? "; checkpoint " + last_ + ": continue with --resume"
              : std::string(" (no checkpoint: train.checkpoint_every is 0)"));
}

}  // namespace zt::app
